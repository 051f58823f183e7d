package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// regenerate is the command that brings the generated files up to date.
const regenerate = "go generate ./internal/cluster/ ./internal/apiv1/ ./internal/admin/ (or make generate)"

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
			t.Errorf("%s is out of date with %s and %s: run %s", o.Path, recordFile, eventFile, regenerate)
		}
	}
}

// TestNewCounterNeedsNoOtherEdit adds a counter to Counters (the struct
// alone) and checks that every generated file spells it: the encoder, the
// scanner's name table and decode, the API type and its conversion.
func TestNewCounterNeedsNoOtherEdit(t *testing.T) {
	in := readInputs(t)
	const last = "\tStoreErrorsTotal      uint64 `json:\"storeErrorsTotal\"`\n"
	if !bytes.Contains(in.record, []byte(last)) {
		t.Fatalf("%s: no line %q to add a counter after", recordFile, last)
	}
	in.record = bytes.Replace(in.record, []byte(last), []byte(last+"\tExampleTotal uint64 `json:\"exampleTotal\"`\n"), 1)
	outs, err := build(in, "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	wantIn(t, outs, map[string][]string{
		"internal/cluster/append_gen.go": {"`,\"exampleTotal\":`", "strconv.AppendUint(dst, r.Counters.ExampleTotal, 10)"},
		"internal/cluster/scan_gen.go":   {"\"exampleTotal\",", "v.ExampleTotal, ok = d.uint64()"},
		"internal/apiv1/types_gen.go":    {"ExampleTotal          uint64 `json:\"exampleTotal\"`"},
		"internal/apiv1/convert_gen.go":  {"ExampleTotal:          v.ExampleTotal,"},
		schemasFile:                      {"\"storeErrorsTotal\",\n      \"exampleTotal\"\n", "\"exampleTotal\": {\n        \"type\": \"integer\",\n        \"minimum\": 0,\n        \"description\": \"" + counterDescription + "\"\n      }\n"},
	})
	schemas := parseSchemas(t, outs)
	if _, ok := schemas["Counters"].Properties["exampleTotal"]; !ok {
		t.Errorf("the Counters schema has no exampleTotal: %v", schemas["Counters"].Properties)
	}
}

// TestNewEventFieldNeedsNoOtherEdit adds a field and an event type to
// state.NodeEvent (events.go alone) and checks that the API's Event, its
// conversion and its schema (the property, the type enum) spell them.
func TestNewEventFieldNeedsNoOtherEdit(t *testing.T) {
	in := readInputs(t)
	const last = "\tCoordinator string `json:\"coordinator,omitempty\"`\n"
	const lastType = "\tEventsDropped NodeEventType = \"events_dropped\"\n"
	for _, l := range []string{last, lastType} {
		if !bytes.Contains(in.events, []byte(l)) {
			t.Fatalf("%s: no line %q to add after", eventFile, l)
		}
	}
	in.events = bytes.Replace(in.events, []byte(last), []byte(last+"\t// Example is an example.\n\tExample string `json:\"example,omitempty\"`\n"), 1)
	in.events = bytes.Replace(in.events, []byte(lastType), []byte(lastType+"\tEventExample NodeEventType = \"example_happened\"\n"), 1)
	outs, err := build(in, "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	wantIn(t, outs, map[string][]string{
		"internal/apiv1/event_gen.go": {"Example string `json:\"example,omitempty\"`", "\"events_dropped\",\n\t\"example_happened\",\n}"},
		"internal/admin/event_gen.go": {"Example:     e.Example,"},
	})
	ev := parseSchemas(t, outs)["Event"]
	if got := string(ev.Properties["example"]["description"]); got != `"Example is an example."` && got != `"Is an example."` {
		t.Errorf("the Event schema's example property: %s", ev.Properties["example"])
	}
	var enum []string
	if err := json.Unmarshal(ev.Properties["type"]["enum"], &enum); err != nil || !slices.Contains(enum, "example_happened") || !slices.Contains(enum, "job_started") {
		t.Errorf("the Event schema's type enum %v (%v): want every NodeEventType constant", enum, err)
	}
}

// TestSchemasFileParses: the schemas file the generator writes is JSON
// that names each nested object and Event, with every Go field a
// property and the required members in it.
func TestSchemasFileParses(t *testing.T) {
	in := readInputs(t)
	outs, err := build(in, "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	schemas := parseSchemas(t, outs)
	s, err := parseSchema(recordFile, in.record, "Record")
	if err != nil {
		t.Fatal(err)
	}
	es, err := parseEvents(eventFile, in.events)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, fields []field, extra ...string) {
		sc, ok := schemas[name]
		if !ok {
			t.Fatalf("no schema %s", name)
		}
		want := extra
		for _, f := range fields {
			want = append(want, f.Name)
		}
		if got := slices.Sorted(maps.Keys(sc.Properties)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("schema %s properties %v, want %v", name, got, want)
		}
		for _, r := range sc.Required {
			if _, ok := sc.Properties[r]; !ok {
				t.Errorf("schema %s requires %s, which it does not describe", name, r)
			}
		}
	}
	for _, o := range s.Nested {
		check(o.Name, o.Fields)
	}
	check("Event", es.Fields, "seq", "timeUnixMs")
	if len(schemas) != len(s.Nested)+1 {
		t.Errorf("%d schemas, want %d", len(schemas), len(s.Nested)+1)
	}
	// A member the generator would drop is refused, not lost.
	bad := bytes.Replace(in.schemas, []byte(`"pattern": `), []byte(`"x-example": 1, "pattern": `), 1)
	if _, err := schemasJSON(s, es, bad); err == nil || !strings.Contains(err.Error(), `member "x-example" is not kept`) {
		t.Errorf("a member the generator does not keep: %v", err)
	}
}

// readInputs reads the generator's inputs from the module.
func readInputs(t *testing.T) inputs {
	t.Helper()
	root := moduleDir(t)
	var in inputs
	for path, dst := range map[string]*[]byte{recordFile: &in.record, apiFile: &in.api, eventFile: &in.events, schemasFile: &in.schemas} {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		*dst = b
	}
	return in
}

// wantIn checks that each output named in want contains its strings.
func wantIn(t *testing.T, outs []output, want map[string][]string) {
	t.Helper()
	for _, o := range outs {
		for _, w := range want[o.Path] {
			if !strings.Contains(string(o.Src), w) {
				t.Errorf("%s lacks %q:\n%s", o.Path, w, o.Src)
			}
		}
	}
}

// generatedSchema is a schema of the schemas file, as a reader parses it.
type generatedSchema struct {
	Required   []string                              `json:"required"`
	Properties map[string]map[string]json.RawMessage `json:"properties"`
}

// parseSchemas parses the schemas file among outs.
func parseSchemas(t *testing.T, outs []output) map[string]generatedSchema {
	t.Helper()
	for _, o := range outs {
		if o.Path == schemasFile {
			var m map[string]generatedSchema
			if err := json.Unmarshal(o.Src, &m); err != nil {
				t.Fatalf("%s does not parse: %v", schemasFile, err)
			}
			return m
		}
	}
	t.Fatalf("no %s among the outputs", schemasFile)
	return nil
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
