package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// schemasFile holds the OpenAPI schemas the generator writes: the
// record's nested objects (Capacity, Counters) and the event (Event). The
// hand-written openapi.json names it (x-talon-generated-schemas) and
// apiv1.OpenAPI merges its schemas into components.schemas, so no
// generator edits the hand-written document.
const schemasFile = "internal/apiv1/openapi_schemas_gen.json"

// prevSchema is what the generator keeps from its previous output: an
// object's description and, per property, every member it does not
// derive from the Go type (description, enum, pattern, minimum, ...).
type prevSchema struct {
	Description string                                `json:"description"`
	Properties  map[string]map[string]json.RawMessage `json:"properties"`
}

// schemasJSON returns the schemas file: one schema per nested object of
// the record, every member required, and Event. prev is the file as it
// is (nil when there is none): descriptions and hand-set members are
// kept from it, new members are described from their Go doc comments.
func schemasJSON(s *schema, es *eventSchema, prev []byte) ([]byte, error) {
	old := map[string]prevSchema{}
	if len(prev) > 0 {
		if err := json.Unmarshal(prev, &old); err != nil {
			return nil, fmt.Errorf("%s: %w", schemasFile, err)
		}
		if err := checkKept(old); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	b.WriteString("{")
	for i, o := range s.Nested {
		if i > 0 {
			b.WriteString(",")
		}
		var props []property
		for _, f := range o.Fields {
			props = append(props, property{name: f.Name, members: nestedMembers(f, old[o.Name].Properties[f.Name])})
		}
		description := old[o.Name].Description
		if description == "" {
			description = fmt.Sprintf("The record's %s object.", lowerFirst(o.Name))
		}
		writeSchema(&b, o.Name, description, requiredAll(o.Fields), props)
	}
	b.WriteString(",")
	prevEvent := old["Event"].Properties
	props := []property{
		{name: "seq", members: keep(prevEvent["seq"], kUint64, `"Sequence number within the coordinator's incarnation, from 1, without gaps."`)},
		{name: "timeUnixMs", members: keep(prevEvent["timeUnixMs"], kInt64, `"When the coordinator observed it (its clock)."`)},
	}
	required := []string{"seq", "timeUnixMs"}
	for _, f := range es.Fields {
		m := keep(prevEvent[f.Name], f.Kind, quote(docSentence(f)))
		if f.GoName == "Type" {
			enum, _ := json.Marshal(es.Types)
			m = setMember(m, "enum", string(enum))
		}
		props = append(props, property{name: f.Name, members: m})
		if !f.Omit {
			required = append(required, f.Name)
		}
	}
	description := old["Event"].Description
	if description == "" {
		description = "One thing a coordinator observed."
	}
	writeSchema(&b, "Event", description, required, props)
	b.WriteString("}")
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("%s: the generator wrote invalid JSON: %w", schemasFile, err)
	}
	out.WriteString("\n")
	return out.Bytes(), nil
}

// property is one property of a schema: its members in order, each a
// name and a JSON value.
type property struct {
	name    string
	members [][2]string
}

// writeSchema writes one schema (compact; indented by the caller).
func writeSchema(b *bytes.Buffer, name, description string, required []string, props []property) {
	req, _ := json.Marshal(required)
	fmt.Fprintf(b, `%s:{"type":"object","description":%s,"additionalProperties":false,"required":%s,"properties":{`, quote(name), quote(description), req)
	for i, p := range props {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(quote(p.name) + ":{")
		for j, m := range p.members {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString(quote(m[0]) + ":" + m[1])
		}
		b.WriteString("}")
	}
	b.WriteString("}}")
}

func requiredAll(fields []field) []string {
	var names []string
	for _, f := range fields {
		names = append(names, f.Name)
	}
	return names
}

// nestedMembers are the members of a nested object's property: derived
// from the field (propertyLines), the description kept from prev.
func nestedMembers(f field, prev map[string]json.RawMessage) [][2]string {
	var description string
	if d, ok := prev["description"]; ok {
		_ = json.Unmarshal(d, &description)
	}
	var out [][2]string
	for _, l := range propertyLines(f, description) {
		k, v, _ := strings.Cut(l, ": ")
		var key string
		_ = json.Unmarshal([]byte(k), &key)
		out = append(out, [2]string{key, v})
	}
	return out
}

// keep returns a property's members: the type (and format) derived from
// kind, then the members of prev the generator keeps (keptMembers), the
// description defaulting to description (a JSON string; "" for none).
// checkKept refuses a previous file with any other member, which would
// be lost silently.
func keep(prev map[string]json.RawMessage, k kind, description string) [][2]string {
	var out [][2]string
	switch k {
	case kString, kNamedString:
		out = append(out, [2]string{"type", `"string"`})
	case kBool:
		out = append(out, [2]string{"type", `"boolean"`})
	case kInt64, kUint64:
		out = append(out, [2]string{"type", `"integer"`}, [2]string{"format", `"int64"`})
	}
	if k == kUint64 && prev["minimum"] == nil {
		out = append(out, [2]string{"minimum", "0"})
	}
	for _, name := range []string{"minimum", "pattern", "enum"} {
		if v, ok := prev[name]; ok {
			var c bytes.Buffer
			_ = json.Compact(&c, v)
			out = append(out, [2]string{name, c.String()})
		}
	}
	if v, ok := prev["description"]; ok {
		out = append(out, [2]string{"description", string(v)})
	} else if description != `""` && description != "" {
		out = append(out, [2]string{"description", description})
	}
	return out
}

// keptMembers are the members of a property that the schemas file keeps
// from its previous version besides those derived from the Go type.
var keptMembers = map[string]bool{"type": true, "format": true, "minimum": true, "pattern": true, "enum": true, "description": true}

// checkKept returns an error naming a member of old that keep would drop.
func checkKept(old map[string]prevSchema) error {
	for _, name := range slices.Sorted(maps.Keys(old)) {
		props := old[name].Properties
		for _, p := range slices.Sorted(maps.Keys(props)) {
			for _, m := range slices.Sorted(maps.Keys(props[p])) {
				if !keptMembers[m] {
					return fmt.Errorf("%s: %s.%s: member %q is not kept by the generator: teach internal/tools/recordgen or remove it", schemasFile, name, p, m)
				}
			}
		}
	}
	return nil
}

// setMember sets member name of m to v, in place or appended before the
// description.
func setMember(m [][2]string, name, v string) [][2]string {
	for i := range m {
		if m[i][0] == name {
			m[i][1] = v
			return m
		}
	}
	for i := range m {
		if m[i][0] == "description" {
			return append(m[:i:i], append([][2]string{{name, v}}, m[i:]...)...)
		}
	}
	return append(m, [2]string{name, v})
}
