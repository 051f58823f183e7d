package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"strings"
)

// Inputs, relative to the module root.
const (
	recordFile = "internal/cluster/record.go"
	apiFile    = "internal/apiv1/types.go"
	// eventFile (events.go) and schemasFile (schemas.go) are inputs too:
	// the node event, and the previous schemas whose descriptions are kept.
)

// output is one generated file.
type output struct {
	Pkg  string // the package directory's name: cluster, apiv1 or admin
	Path string // relative to the module root
	Src  []byte
}

func main() {
	pkg := flag.String("pkg", "", "write only the files of this package (cluster, apiv1 or admin); all when empty")
	flag.Parse()
	if err := run(*pkg); err != nil {
		fmt.Fprintln(os.Stderr, "recordgen:", err)
		os.Exit(1)
	}
}

func run(pkg string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	outs, err := generate(root)
	if err != nil {
		return err
	}
	for _, o := range outs {
		if pkg != "" && o.Pkg != pkg {
			continue
		}
		if err := os.WriteFile(filepath.Join(root, o.Path), o.Src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generate returns every generated file, from the inputs under root.
func generate(root string) ([]output, error) {
	var in inputs
	for _, f := range []struct {
		path     string
		dst      *[]byte
		optional bool
	}{
		{recordFile, &in.record, false}, {apiFile, &in.api, false}, {eventFile, &in.events, false}, {schemasFile, &in.schemas, true},
	} {
		b, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil && !(f.optional && errors.Is(err, os.ErrNotExist)) {
			return nil, err
		}
		*f.dst = b
	}
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	return build(in, module)
}

// inputs are the texts the generator reads.
type inputs struct {
	record  []byte // recordFile
	api     []byte // apiFile
	events  []byte // eventFile
	schemas []byte // schemasFile as it is; nil when there is none
}

// build returns every generated file from the text of the inputs.
func build(in inputs, module string) ([]output, error) {
	s, err := parseSchema(recordFile, in.record, "Record")
	if err != nil {
		return nil, err
	}
	node, err := structFields(apiFile, in.api, "Node")
	if err != nil {
		return nil, err
	}
	es, err := parseEvents(eventFile, in.events)
	if err != nil {
		return nil, err
	}
	schemas, err := schemasJSON(s, es, in.schemas)
	if err != nil {
		return nil, err
	}
	outs := []output{
		{"cluster", "internal/cluster/append_gen.go", appendGo(s)},
		{"cluster", "internal/cluster/scan_gen.go", scanGo(s)},
		{"apiv1", "internal/apiv1/types_gen.go", apiTypesGo(s)},
		{"apiv1", "internal/apiv1/convert_gen.go", apiConvertGo(s, module, node)},
		{"apiv1", "internal/apiv1/event_gen.go", apiEventGo(es)},
		{"admin", "internal/admin/event_gen.go", adminEventGo(es, module)},
	}
	for i := range outs {
		b, err := format.Source(outs[i].Src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (the generator wrote invalid Go)", outs[i].Path, err)
		}
		outs[i].Src = b
	}
	return append(outs, output{"apiv1", schemasFile, schemas}), nil
}

// moduleRoot returns the directory of the go.mod above the working
// directory (go generate runs in the package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// modulePath reads the module path from root's go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := strings.CutPrefix(string(line), "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", errors.New("go.mod names no module")
}
