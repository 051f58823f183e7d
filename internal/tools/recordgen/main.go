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
)

// output is one generated file.
type output struct {
	Pkg  string // the package directory's name: cluster or apiv1
	Path string // relative to the module root
	Src  []byte
}

func main() {
	pkg := flag.String("pkg", "", "write only the files of this package (cluster or apiv1); all when empty")
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
	record, err := os.ReadFile(filepath.Join(root, recordFile))
	if err != nil {
		return nil, err
	}
	api, err := os.ReadFile(filepath.Join(root, apiFile))
	if err != nil {
		return nil, err
	}
	openapi, err := os.ReadFile(filepath.Join(root, openapiFile))
	if err != nil {
		return nil, err
	}
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	return build(record, api, openapi, module)
}

// build returns every generated file from the text of the inputs.
func build(record, api, openapi []byte, module string) ([]output, error) {
	s, err := parseSchema(recordFile, record, "Record")
	if err != nil {
		return nil, err
	}
	node, err := structFields(apiFile, api, "Node")
	if err != nil {
		return nil, err
	}
	doc, err := openapiJSON(s, openapi)
	if err != nil {
		return nil, err
	}
	outs := []output{
		{"cluster", "internal/cluster/append_gen.go", appendGo(s)},
		{"cluster", "internal/cluster/scan_gen.go", scanGo(s)},
		{"apiv1", "internal/apiv1/types_gen.go", apiTypesGo(s)},
		{"apiv1", "internal/apiv1/convert_gen.go", apiConvertGo(s, module, node)},
	}
	for i := range outs {
		if !strings.HasSuffix(outs[i].Path, ".go") {
			continue
		}
		b, err := format.Source(outs[i].Src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (the generator wrote invalid Go)", outs[i].Path, err)
		}
		outs[i].Src = b
	}
	return append(outs, output{"apiv1", openapiFile, doc}), nil
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
