// Command recordgen writes the code that spells the node record's schema
// (internal/cluster/record.go: Record and the structs it nests) from the
// struct definitions and their json tags, so that a field is declared once:
//
//   - internal/cluster/append_gen.go: appendRecordLabels, the encoder of the
//     heartbeat path, every member in field order with its omitempty rule;
//   - internal/cluster/scan_gen.go: the member-name tables and the per-field
//     decode of the canonical scanner;
//   - internal/apiv1/types_gen.go and convert_gen.go: the /api/v1 mirrors
//     of the nested objects (Capacity, Counters), their conversions, and the
//     copy of every Record field apiv1.Node has under the same name and type;
//   - in internal/apiv1/openapi.json, otherwise hand-written, the schemas of
//     those objects (descriptions already there are kept).
//
// What is not a plain scalar stays hand-written beside the output and is
// called by it: string escaping (appendString), the labels map
// (appendLabels, scanner.labels), string lists (appendStrings,
// scanner.strings), the interning of named string types (internRole,
// internHealth: intern<Type>) and the derived Node fields. A field of a
// type the generator does not know is an error, not a guess.
//
// It runs from go generate in internal/cluster (-pkg cluster) and
// internal/apiv1 (-pkg apiv1); `make generate` runs both. Its test fails
// when a checked-in file differs from what it would write.
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
