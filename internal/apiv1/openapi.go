package apiv1

import _ "embed"

// openAPI is the checked-in document; a string, so it cannot be modified.
//
//go:embed openapi.json
var openAPI string

// OpenAPI returns the OpenAPI 3 document of the administration listener
// (checked in as openapi.json, served at PathOpenAPI). The caller owns the
// returned slice.
func OpenAPI() []byte { return []byte(openAPI) }
