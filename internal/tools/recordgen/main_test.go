package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// regenerate is the command that brings the generated files up to date.
const regenerate = "go generate ./internal/cluster/ ./internal/apiv1/ (or make generate)"

func moduleDir(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGeneratedUpToDate runs the generator in memory and compares its
// output with the checked-in files: a field changed in
// internal/cluster/record.go without regenerating fails here.
func TestGeneratedUpToDate(t *testing.T) {
	root := moduleDir(t)
	outs, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		have, err := os.ReadFile(filepath.Join(root, o.Path))
		if err != nil {
			t.Errorf("%s: %v: run %s", o.Path, err, regenerate)
			continue
		}
		if !bytes.Equal(have, o.Src) {
			t.Errorf("%s is out of date with %s: run %s", o.Path, recordFile, regenerate)
		}
	}
}

// TestNewCounterNeedsNoOtherEdit adds a counter to Counters (the struct
// alone) and checks that every generated file spells it: the encoder, the
// scanner's name table and decode, the API type and its conversion.
func TestNewCounterNeedsNoOtherEdit(t *testing.T) {
	root := moduleDir(t)
	record, err := os.ReadFile(filepath.Join(root, recordFile))
	if err != nil {
		t.Fatal(err)
	}
	api, err := os.ReadFile(filepath.Join(root, apiFile))
	if err != nil {
		t.Fatal(err)
	}
	openapi, err := os.ReadFile(filepath.Join(root, openapiFile))
	if err != nil {
		t.Fatal(err)
	}
	const last = "\tStoreErrorsTotal      uint64 `json:\"storeErrorsTotal\"`\n"
	if !bytes.Contains(record, []byte(last)) {
		t.Fatalf("%s: no line %q to add a counter after", recordFile, last)
	}
	record = bytes.Replace(record, []byte(last), []byte(last+"\tExampleTotal uint64 `json:\"exampleTotal\"`\n"), 1)
	outs, err := build(record, api, openapi, "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"internal/cluster/append_gen.go": {"`,\"exampleTotal\":`", "strconv.AppendUint(dst, r.Counters.ExampleTotal, 10)"},
		"internal/cluster/scan_gen.go":   {"\"exampleTotal\",", "v.ExampleTotal, ok = d.uint64()"},
		"internal/apiv1/types_gen.go":    {"ExampleTotal          uint64 `json:\"exampleTotal\"`"},
		"internal/apiv1/convert_gen.go":  {"ExampleTotal:          v.ExampleTotal,"},
		openapiFile:                      {"\"storeErrorsTotal\",\n          \"exampleTotal\"\n", "\"exampleTotal\": {\n            \"type\": \"integer\",\n            \"minimum\": 0,\n            \"description\": \"" + counterDescription + "\"\n          }\n"},
	}
	for _, o := range outs {
		for _, w := range want[o.Path] {
			if !strings.Contains(string(o.Src), w) {
				t.Errorf("%s lacks %q:\n%s", o.Path, w, o.Src)
			}
		}
	}
}

// TestUnsupportedFieldRefused: a field of a type the generator does not
// know is an error naming it, not a silent omission.
func TestUnsupportedFieldRefused(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"float", "type Record struct {\n\tA string `json:\"a\"`\n\tF float64 `json:\"f\"`\n}\n", "Record.F: type float64 is not supported"},
		{"no tag", "type Record struct {\n\tA string `json:\"a\"`\n\tB string\n}\n", "Record.B has no json tag"},
		{"map without omitempty", "type Record struct {\n\tA string `json:\"a\"`\n\tM map[string]string `json:\"m\"`\n}\n", "needs omitempty"},
		{"first omitted", "type Record struct {\n\tA string `json:\"a\"`\n\tC C `json:\"c\"`\n}\ntype C struct {\n\tX uint64 `json:\"x,omitempty\"`\n}\n", "struct C: its first field must be present"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSchema("record.go", []byte("package cluster\n\n"+tc.src), "Record")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
