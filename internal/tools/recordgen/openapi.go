package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// openapiFile is the API's OpenAPI document: hand-written, but for the
// schemas of the nested objects (Capacity, Counters), which the generator
// rewrites in place so that TestOpenAPISchemasMatchGoTypes holds after a
// field is added to record.go.
const openapiFile = "internal/apiv1/openapi.json"

// schemaIndent is the indentation of a schema's name under
// components.schemas.
const schemaIndent = "      "

// counterDescription describes a new cumulative counter (a uint64 whose
// name ends in Total) that has no doc comment.
const counterDescription = "Cumulative count since the incarnation started."

// openapiJSON returns doc with the schema of each nested object rewritten
// from its fields, in field order: every member required, integers with
// their range, descriptions kept from doc where the member was already
// described.
func openapiJSON(s *schema, doc []byte) ([]byte, error) {
	for _, o := range s.Nested {
		start := bytes.Index(doc, []byte("\n"+schemaIndent+`"`+o.Name+`": {`+"\n"))
		if start < 0 {
			return nil, fmt.Errorf("%s: no schema %s under components.schemas", openapiFile, o.Name)
		}
		start++
		end := bytes.Index(doc[start:], []byte("\n"+schemaIndent+"}"))
		if end < 0 {
			return nil, fmt.Errorf("%s: schema %s does not end", openapiFile, o.Name)
		}
		end += start + 1 + len(schemaIndent) + 1
		var old struct {
			Description string
			Properties  map[string]struct{ Description string }
		}
		if err := json.Unmarshal(doc[start+len(schemaIndent)+len(o.Name)+4:end], &old); err != nil {
			return nil, fmt.Errorf("%s: schema %s: %w", openapiFile, o.Name, err)
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s%s: {\n", schemaIndent, quote(o.Name))
		in := schemaIndent + "  "
		fmt.Fprintf(&b, "%s\"type\": \"object\",\n%s\"description\": %s,\n%s\"additionalProperties\": false,\n%s\"required\": [\n",
			in, in, quote(old.Description), in, in)
		for i, f := range o.Fields {
			fmt.Fprintf(&b, "%s  %s%s\n", in, quote(f.Name), comma(i, len(o.Fields)))
		}
		fmt.Fprintf(&b, "%s],\n%s\"properties\": {\n", in, in)
		for i, f := range o.Fields {
			lines := propertyLines(f, old.Properties[f.Name].Description)
			fmt.Fprintf(&b, "%s  %s: {\n%s    %s\n%s  }%s\n", in, quote(f.Name), in, strings.Join(lines, ",\n"+in+"    "), in, comma(i, len(o.Fields)))
		}
		fmt.Fprintf(&b, "%s}\n%s}", in, schemaIndent)
		doc = append(doc[:start:start], append(b.Bytes(), doc[end:]...)...)
	}
	return doc, nil
}

// propertyLines are the members of a field's property schema.
func propertyLines(f field, description string) []string {
	var lines []string
	switch f.Kind {
	case kString, kNamedString:
		lines = append(lines, `"type": "string"`)
	case kBool:
		lines = append(lines, `"type": "boolean"`)
	case kInt64:
		lines = append(lines, `"type": "integer"`, `"format": "int64"`)
	case kUint64:
		lines = append(lines, `"type": "integer"`, `"minimum": 0`)
	}
	if description == "" {
		description = docSentence(f)
	}
	if description == "" && f.Kind == kUint64 && strings.HasSuffix(f.GoName, "Total") {
		description = counterDescription
	}
	if description != "" {
		lines = append(lines, `"description": `+quote(description))
	}
	return lines
}

// docSentence is f's Go doc comment as an API description: on one line,
// without the leading field name ("RetriesTotal counts loads retried." ->
// "Counts loads retried.").
func docSentence(f field) string {
	d := strings.Join(strings.Fields(f.Doc), " ")
	if rest, ok := strings.CutPrefix(d, f.GoName+" "); ok && rest != "" {
		d = strings.ToUpper(rest[:1]) + rest[1:]
	}
	return d
}

// quote writes s as a JSON string, with <, > and & as they are.
func quote(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// comma separates the members of a list of n.
func comma(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}
