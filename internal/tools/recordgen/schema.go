package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"strings"
)

// kind is how a field is encoded, decoded and converted.
type kind int

// Kinds of fields. Every plain scalar is generated in full; the last two
// call hand-written helpers (their shape is not a scalar's).
const (
	kString      kind = iota // string
	kNamedString             // a named string type of the file (Role, Health): interned on decode
	kBool                    // bool
	kInt64                   // int64
	kUint64                  // uint64
	kStruct                  // a struct type of the file: a nested object
	kLabels                  // map[string]string: appendLabels, scanner.labels
	kStrings                 // []string: appendStrings, scanner.strings
)

// field is one member of an object.
type field struct {
	GoName string // the Go field name
	Name   string // the JSON member name (the json tag's)
	Omit   bool   // omitempty
	Type   string // the Go type as spelled in the file
	Kind   kind
	Doc    string // the field's doc comment, without comment markers
}

// object is a struct of the file.
type object struct {
	Name   string
	Fields []field
}

// schema is what the generator reads from record.go: the root struct and
// the structs its fields nest, in the order the root names them.
type schema struct {
	Record *object
	Nested []*object // struct-typed fields' types, in field order
}

// parseSchema reads the structs of src (the text of record.go, named
// filename in errors) and returns the schema rooted at the struct root.
func parseSchema(filename string, src []byte, root string) (*schema, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	structs := map[string]*ast.StructType{}
	namedStrings := map[string]bool{}
	for name, ts := range typeSpecs(f) {
		switch t := ts.Type.(type) {
		case *ast.StructType:
			structs[name] = t
		case *ast.Ident:
			namedStrings[name] = t.Name == "string"
		}
	}
	p := &schemaParser{fset: fset, structs: structs, namedStrings: namedStrings}
	rec, err := p.object(root)
	if err != nil {
		return nil, err
	}
	s := &schema{Record: rec}
	seen := map[string]bool{}
	for _, fl := range rec.Fields {
		if fl.Kind != kStruct || seen[fl.Type] {
			continue
		}
		seen[fl.Type] = true
		nested, err := p.object(fl.Type)
		if err != nil {
			return nil, err
		}
		for _, nf := range nested.Fields {
			if !scalar(nf.Kind) {
				return nil, fmt.Errorf("%s.%s: a nested object holds only scalars (string, bool, int64, uint64), not %s", nested.Name, nf.GoName, nf.Type)
			}
		}
		s.Nested = append(s.Nested, nested)
	}
	return s, nil
}

// typeSpecs returns the type declarations of f by name.
func typeSpecs(f *ast.File) map[string]*ast.TypeSpec {
	specs := map[string]*ast.TypeSpec{}
	for _, decl := range f.Decls {
		if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				specs[ts.Name.Name] = ts
			}
		}
	}
	return specs
}

// scalar reports a kind the generator writes, reads and converts in full.
func scalar(k kind) bool { return k <= kUint64 }

type schemaParser struct {
	fset         *token.FileSet
	structs      map[string]*ast.StructType
	namedStrings map[string]bool
}

// object returns the fields of the struct named name, in order.
func (p *schemaParser) object(name string) (*object, error) {
	st, ok := p.structs[name]
	if !ok {
		return nil, fmt.Errorf("no struct %s in the file", name)
	}
	o := &object{Name: name}
	for _, af := range st.Fields.List {
		if len(af.Names) == 0 {
			return nil, fmt.Errorf("%s: embedded field %s is not supported", p.fset.Position(af.Pos()), types(af.Type))
		}
		for _, n := range af.Names {
			fl, skip, err := p.field(name, n.Name, af)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.fset.Position(n.Pos()), err)
			}
			if !skip {
				o.Fields = append(o.Fields, fl)
			}
		}
	}
	if len(o.Fields) == 0 || o.Fields[0].Omit {
		// The appender writes an object's first member without a
		// comma, unconditionally.
		return nil, fmt.Errorf("struct %s: its first field must be present and not omitempty", name)
	}
	return o, nil
}

// field reads one field; skip is set for `json:"-"`.
func (p *schemaParser) field(structName, goName string, af *ast.Field) (fl field, skip bool, err error) {
	if af.Tag == nil {
		return fl, false, fmt.Errorf("%s.%s has no json tag", structName, goName)
	}
	tag, err := strconv.Unquote(af.Tag.Value)
	if err != nil {
		return fl, false, err
	}
	jsonTag, ok := reflect.StructTag(tag).Lookup("json")
	if !ok {
		return fl, false, fmt.Errorf("%s.%s has no json tag", structName, goName)
	}
	if jsonTag == "-" {
		return fl, true, nil
	}
	name, opts, _ := strings.Cut(jsonTag, ",")
	if !plainName(name) {
		return fl, false, fmt.Errorf("%s.%s: json name %q: want letters and digits only", structName, goName, name)
	}
	fl = field{GoName: goName, Name: name, Type: types(af.Type), Doc: strings.TrimSpace(af.Doc.Text())}
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "omitempty":
			fl.Omit = true
		case "":
		default:
			return fl, false, fmt.Errorf("%s.%s: json option %q is not supported", structName, goName, o)
		}
	}
	if fl.Kind, err = p.kindOf(fl.Type, fl.Omit); err != nil {
		return fl, false, fmt.Errorf("%s.%s: %w", structName, goName, err)
	}
	return fl, false, nil
}

// kindOf classifies a field's type.
func (p *schemaParser) kindOf(t string, omit bool) (kind, error) {
	switch t {
	case "string":
		return kString, nil
	case "bool":
		return kBool, nil
	case "int64":
		return kInt64, nil
	case "uint64":
		return kUint64, nil
	case "map[string]string", "[]string":
		if !omit {
			// Without omitempty a nil one is null: not the shape the
			// appender and the scanner share.
			return 0, fmt.Errorf("type %s needs omitempty", t)
		}
		if t == "[]string" {
			return kStrings, nil
		}
		return kLabels, nil
	}
	if p.namedStrings[t] {
		return kNamedString, nil
	}
	if _, ok := p.structs[t]; ok {
		return kStruct, nil
	}
	return 0, fmt.Errorf("type %s is not supported: teach internal/tools/recordgen", t)
}

// types spells a type expression as the file does.
func types(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.MapType:
		return "map[" + types(t.Key) + "]" + types(t.Value)
	case *ast.ArrayType:
		if t.Len == nil {
			return "[]" + types(t.Elt)
		}
	case *ast.StarExpr:
		return "*" + types(t.X)
	case *ast.SelectorExpr:
		return types(t.X) + "." + t.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

// plainName reports a JSON name that needs no escaping and no quoting
// care in a Go raw string: letters and digits.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// lowerFirst is the scanner method and name-table prefix of an object:
// Capacity -> capacity.
func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }
