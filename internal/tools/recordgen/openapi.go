package main

import (
	"bytes"
	"encoding/json"
	"strings"
)

// counterDescription describes a new cumulative counter (a uint64 whose
// name ends in Total) that has no doc comment.
const counterDescription = "Cumulative count since the incarnation started."

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
