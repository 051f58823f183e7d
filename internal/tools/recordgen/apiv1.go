package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// apiTypeDocs are the doc comments of the /api/v1 mirrors of the nested
// objects: the wire's own words (a node, not a process; how a reader
// takes the numbers). A nested object not listed gets a plain sentence.
var apiTypeDocs = map[string]string{
	"Capacity": "Capacity is the gauge snapshot of a node: what it holds now.",
	"Counters": "Counters are the cumulative counters of a node's current incarnation.\n" +
		"They reset when the incarnation changes. Values are JSON numbers; beyond\n" +
		"2^53 a JavaScript reader loses precision.",
}

// derivedNodeFields are the fields of apiv1.Node that share a name and
// type with a Record field but are not a copy of it: NodeFromRecord
// computes them.
var derivedNodeFields = map[string]bool{
	"HeartbeatAtUnixMs": true, // Record.HeartbeatAt(): UpdatedAtUnixMs on records written before the field
}

// apiTypesGo returns internal/apiv1/types_gen.go: a wire type for each
// nested object, every member always sent (no omitempty: a reader finds
// every counter, zero or not), named string types as string.
func apiTypesGo(s *schema) []byte {
	var b bytes.Buffer
	b.WriteString(header + "package apiv1\n")
	for _, o := range s.Nested {
		doc, ok := apiTypeDocs[o.Name]
		if !ok {
			doc = fmt.Sprintf("%s is the record's %s object as the API sends it.", o.Name, lowerFirst(o.Name))
		}
		fmt.Fprintf(&b, "\n%s\ntype %s struct {\n", comment(doc), o.Name)
		for _, f := range o.Fields {
			if f.Doc != "" {
				b.WriteString(comment(f.Doc) + "\n")
			}
			fmt.Fprintf(&b, "%s %s `json:\"%s\"`\n", f.GoName, apiType(f), f.Name)
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// apiType is the wire type of a scalar field.
func apiType(f field) string {
	if f.Kind == kNamedString {
		return "string"
	}
	return f.Type
}

// apiConvertGo returns internal/apiv1/convert_gen.go: the conversion of
// each nested object, and nodeFields, which copies every Record field that
// apiv1.Node (nodeTypes, the Node struct of types.go) has with the same
// name and type, nested objects converted.
func apiConvertGo(s *schema, module string, node map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%spackage apiv1\n\nimport %q\n", header, module+"/internal/cluster")
	for _, o := range s.Nested {
		fmt.Fprintf(&b, "\n// %sFrom converts a record's %s object.\nfunc %sFrom(v cluster.%s) %s {\n\treturn %s{\n",
			o.Name, lowerFirst(o.Name), o.Name, o.Name, o.Name, o.Name)
		for _, f := range o.Fields {
			if f.Kind == kNamedString {
				fmt.Fprintf(&b, "%s: string(v.%s),\n", f.GoName, f.GoName)
			} else {
				fmt.Fprintf(&b, "%s: v.%s,\n", f.GoName, f.GoName)
			}
		}
		b.WriteString("}\n}\n")
	}
	b.WriteString(`
// nodeFields returns the Node fields that are copies of r's: those of the
// same name and type (nested objects converted). NodeFromRecord sets the
// rest.
func nodeFields(r *cluster.Record) Node {
	return Node{
`)
	for _, f := range s.Record.Fields {
		t, ok := node[f.GoName]
		switch {
		case !ok || derivedNodeFields[f.GoName]:
		case f.Kind == kStruct && t == f.Type:
			fmt.Fprintf(&b, "%s: %sFrom(r.%s),\n", f.GoName, f.Type, f.GoName)
		case scalar(f.Kind) && t == f.Type:
			fmt.Fprintf(&b, "%s: r.%s,\n", f.GoName, f.GoName)
		}
	}
	b.WriteString("}\n}\n")
	return b.Bytes()
}

// comment turns text into // lines.
func comment(text string) string {
	return "// " + strings.ReplaceAll(text, "\n", "\n// ")
}

// structFields returns the field types of the struct named name in src,
// by field name.
func structFields(filename string, src []byte, name string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filename, src, 0)
	if err != nil {
		return nil, err
	}
	ts := typeSpecs(f)[name]
	if ts == nil {
		return nil, fmt.Errorf("%s: no type %s", filename, name)
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("%s: %s is not a struct", filename, name)
	}
	fields := map[string]string{}
	for _, af := range st.Fields.List {
		for _, n := range af.Names {
			fields[n.Name] = types(af.Type)
		}
	}
	return fields, nil
}
