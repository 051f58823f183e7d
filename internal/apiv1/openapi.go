package apiv1

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"
)

// The OpenAPI document is checked in as two files: openapi.json, written
// by hand, and openapi_schemas_gen.json, the schemas internal/tools/recordgen
// writes from the Go structs (the record's nested objects, the event).
// openapi.json names the second (generatedSchemasKey); OpenAPI merges them
// into components.schemas once.
var (
	//go:embed openapi.json
	openAPIHand string
	//go:embed openapi_schemas_gen.json
	openAPIGenerated string
)

// generatedSchemasKey is the member of openapi.json that names the file
// of generated schemas; the served document does not carry it.
const generatedSchemasKey = "x-talon-generated-schemas"

var openAPIDoc = sync.OnceValues(func() ([]byte, error) {
	return mergeOpenAPI([]byte(openAPIHand), []byte(openAPIGenerated))
})

// OpenAPI returns the OpenAPI 3 document of the administration listener
// (served at PathOpenAPI): openapi.json with the generated schemas merged
// in. The caller owns the returned slice. It panics if the checked-in
// files do not merge, which TestOpenAPIDocumentValidates rules out.
func OpenAPI() []byte {
	doc, err := openAPIDoc()
	if err != nil {
		panic(err)
	}
	return bytes.Clone(doc)
}

// mergeOpenAPI returns hand with the schemas of generated added to
// components.schemas and the generatedSchemasKey member removed. A schema
// in both, or a hand document that does not name the generated file, is
// an error.
func mergeOpenAPI(hand, generated []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(hand, &doc); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	if _, ok := doc[generatedSchemasKey]; !ok {
		return nil, fmt.Errorf("openapi.json: no %s member naming the generated schemas", generatedSchemasKey)
	}
	delete(doc, generatedSchemasKey)
	var components map[string]json.RawMessage
	if err := json.Unmarshal(doc["components"], &components); err != nil {
		return nil, fmt.Errorf("openapi.json: components: %w", err)
	}
	var schemas, gen map[string]json.RawMessage
	if err := json.Unmarshal(components["schemas"], &schemas); err != nil {
		return nil, fmt.Errorf("openapi.json: components.schemas: %w", err)
	}
	if err := json.Unmarshal(generated, &gen); err != nil {
		return nil, fmt.Errorf("openapi_schemas_gen.json: %w", err)
	}
	for name, s := range gen {
		if _, dup := schemas[name]; dup {
			return nil, fmt.Errorf("schema %s is both in openapi.json and generated: remove it from openapi.json", name)
		}
		schemas[name] = s
	}
	var err error
	if components["schemas"], err = json.Marshal(schemas); err != nil {
		return nil, err
	}
	if doc["components"], err = json.Marshal(components); err != nil {
		return nil, err
	}
	return json.MarshalIndent(doc, "", "  ")
}
