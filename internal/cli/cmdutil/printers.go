package cmdutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/template"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// Template output formats: -o KIND=ARG. The -file forms read ARG as a
// file name. They apply to the API's own JSON objects (RawObject), so a
// field a newer server adds can be printed by a client that does not know
// it. Like kubectl: jsonpath and go-template see the whole answer (a list
// is one object with items); custom-columns print one row per item.
const (
	OutputJSONPath          = "jsonpath"
	OutputJSONPathFile      = "jsonpath-file"
	OutputGoTemplate        = "go-template"
	OutputGoTemplateFile    = "go-template-file"
	OutputCustomColumns     = "custom-columns"
	OutputCustomColumnsFile = "custom-columns-file"
)

// TemplateFormats are the -o KIND=ARG forms, documented in help.
var TemplateFormats = []string{OutputJSONPath, OutputJSONPathFile, OutputGoTemplate, OutputGoTemplateFile, OutputCustomColumns, OutputCustomColumnsFile}

// TemplateFormatsHelp describes the -o KIND=ARG forms for a command's help.
const TemplateFormatsHelp = `-o also takes, like kubectl, over the API's own JSON objects (so fields a newer
server adds are kept and can be printed):
  -o jsonpath='{.items[*].nodeId}'            client-go JSONPath over the whole answer
  -o jsonpath-file=FILE
  -o go-template='{{range .items}}{{.nodeId}}{{"\n"}}{{end}}'   Go text/template
  -o go-template-file=FILE
  -o custom-columns='NODE:.nodeId,ZONE:.labels.zone'   one row per node
  -o custom-columns-file=FILE                 a header line, then a line of JSONPaths`

// Output is a parsed -o value.
type Output struct {
	// Kind is the format: table, json, ..., or one of TemplateFormats.
	Kind string
	// Raw is the flag's value as given, for error messages.
	Raw string

	jp      *jsonpath.JSONPath
	tmpl    *template.Template
	headers []string
	columns []*jsonpath.JSONPath
}

// ParseOutput parses the -o value: one of plain (the command's formats
// without an argument) or KIND=ARG with KIND in TemplateFormats. Templates
// are parsed here, so a bad one is a usage error before any request;
// readFile reads the -file forms (os.ReadFile when nil).
func ParseOutput(value string, plain []string, readFile func(string) ([]byte, error)) (*Output, error) {
	kind, arg, hasArg := strings.Cut(value, "=")
	o := &Output{Kind: kind, Raw: value}
	if !hasArg {
		if err := CheckEnum("output", value, plain); err != nil {
			return nil, UsageErrorf("--output %q: must be one of %s, or KIND=TEMPLATE with KIND one of %s", value, strings.Join(plain, ", "), strings.Join(TemplateFormats, ", "))
		}
		return o, nil
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	bad := func(err error) error { return UsageErrorf("--output %q: %v", value, err) }
	if strings.HasSuffix(kind, "-file") {
		b, err := readFile(arg)
		if err != nil {
			return nil, bad(err)
		}
		arg = string(b)
	}
	if strings.TrimSpace(arg) == "" {
		return nil, bad(errors.New("the template is empty"))
	}
	switch kind {
	case OutputJSONPath, OutputJSONPathFile:
		jp := jsonpath.New("output").AllowMissingKeys(true)
		if err := jp.Parse(arg); err != nil {
			return nil, bad(fmt.Errorf("jsonpath: %w", err))
		}
		o.jp = jp
	case OutputGoTemplate, OutputGoTemplateFile:
		t, err := template.New("output").Parse(arg)
		if err != nil {
			return nil, bad(err)
		}
		o.tmpl = t
	case OutputCustomColumns:
		if err := o.parseColumns(strings.Split(arg, ",")); err != nil {
			return nil, bad(err)
		}
	case OutputCustomColumnsFile:
		lines := strings.Split(strings.TrimSpace(arg), "\n")
		if len(lines) != 2 {
			return nil, bad(fmt.Errorf("a custom-columns file has 2 lines (headers, then JSONPaths), this one has %d", len(lines)))
		}
		hs, ps := strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(hs) != len(ps) {
			return nil, bad(fmt.Errorf("%d headers but %d JSONPaths", len(hs), len(ps)))
		}
		specs := make([]string, len(hs))
		for i := range hs {
			specs[i] = hs[i] + ":" + ps[i]
		}
		if err := o.parseColumns(specs); err != nil {
			return nil, bad(err)
		}
	default:
		return nil, UsageErrorf("--output %q: %q takes no argument; KIND=... is one of %s", value, kind, strings.Join(TemplateFormats, ", "))
	}
	return o, nil
}

// parseColumns parses HEADER:JSONPATH specs; a path without braces is
// relaxed as kubectl does (.a.b and a.b both mean {.a.b}).
func (o *Output) parseColumns(specs []string) error {
	for _, s := range specs {
		h, p, ok := strings.Cut(s, ":")
		if !ok || h == "" || p == "" {
			return fmt.Errorf("column %q: must be HEADER:JSONPATH", s)
		}
		if !strings.HasPrefix(p, "{") {
			if !strings.HasPrefix(p, ".") {
				p = "." + p
			}
			p = "{" + p + "}"
		}
		jp := jsonpath.New(h).AllowMissingKeys(true)
		if err := jp.Parse(p); err != nil {
			return fmt.Errorf("column %q: jsonpath: %w", h, err)
		}
		o.headers = append(o.headers, h)
		o.columns = append(o.columns, jp)
	}
	return nil
}

// IsRaw reports whether the format prints the API's JSON object rather
// than the decoded types (json, yaml and the template formats).
func (o *Output) IsRaw() bool {
	switch o.Kind {
	case OutputJSON, OutputYAML:
		return true
	}
	for _, k := range TemplateFormats {
		if o.Kind == k {
			return true
		}
	}
	return false
}

// Print writes obj, one JSON object as the API sent it, in the format;
// items are the objects custom-columns print one row each of, and
// noHeaders drops their header row.
func (o *Output) Print(w io.Writer, obj []byte, items [][]byte, noHeaders bool) error {
	switch o.Kind {
	case OutputJSON:
		var b bytes.Buffer
		if err := json.Indent(&b, bytes.TrimSpace(obj), "", "  "); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	case OutputYAML:
		b, err := yaml.JSONToYAML(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case OutputCustomColumns, OutputCustomColumnsFile:
		t := NewTable(o.headers...)
		for _, it := range items {
			v, err := decode(it)
			if err != nil {
				return err
			}
			row := make([]string, len(o.columns))
			for i, jp := range o.columns {
				var b bytes.Buffer
				if err := jp.Execute(&b, v); err != nil {
					return fmt.Errorf("--output %q: column %s: %w", o.Raw, o.headers[i], err)
				}
				row[i] = b.String()
				if row[i] == "" {
					row[i] = "<none>"
				}
			}
			t.AddRow(row...)
		}
		return t.Render(w, noHeaders)
	}
	v, err := decode(obj)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	switch {
	case o.jp != nil:
		err = o.jp.Execute(&b, v)
	case o.tmpl != nil:
		err = o.tmpl.Execute(&b, v)
	default:
		return fmt.Errorf("output %q prints no raw object", o.Kind)
	}
	if err != nil {
		return UsageErrorf("--output %q: %w", o.Raw, err)
	}
	_, err = w.Write(b.Bytes())
	return err
}

// decode decodes a JSON object keeping numbers exact (json.Number).
func decode(obj []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// RawObject is a JSON object whose keys keep the order the server sent
// them in and whose values stay as sent.
type RawObject struct {
	keys []string
	vals map[string]json.RawMessage
}

// ParseRawObject parses one JSON object.
func ParseRawObject(b []byte) (*RawObject, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("answer is not a JSON object")
	}
	o := &RawObject{vals: map[string]json.RawMessage{}}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.vals[k]; !dup {
			o.keys = append(o.keys, k)
		}
		o.vals[k] = v
	}
	return o, nil
}

// Get returns the value of key, nil when absent.
func (o *RawObject) Get(key string) json.RawMessage { return o.vals[key] }

// Set sets key to v, appending it when new.
func (o *RawObject) Set(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// Delete removes key.
func (o *RawObject) Delete(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	o.keys = slices.DeleteFunc(o.keys, func(k string) bool { return k == key })
}

// MarshalJSON writes the object with its keys in order.
func (o *RawObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
