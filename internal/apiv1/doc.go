// Package apiv1 is the /api/v1 management API of Talon's administration
// listener (ADR 0001 sections 8 to 11): the JSON wire types and a small
// HTTP client for them. The admin server (internal/admin), talonctl and the
// TUI all use these types, so the CLI never imports the server.
//
// JSON conventions, which every consumer may rely on:
//
//   - Field names are lowerCamelCase. A field holding a quantity names its
//     unit: heartbeatAgeMs, updatedAtUnixMs, residentBytes. Cumulative
//     counters end in Total.
//   - Every successful /api/v1 response carries Meta: schemaVersion,
//     generatedAtUnixMs, revision (an opaque store revision: compare it with
//     ==, never parse or order it), observedAtUnixMs and stale. A response
//     built from a coordinator's last good snapshot, served only when the
//     request asks for it with allowStale=true, has stale=true.
//   - 64-bit PlacementVersions and HRW scores are 16-digit lowercase hex
//     strings, because JavaScript numbers cannot hold a u64.
//   - Lists are objects with items (never null) and continue (empty on the
//     last page). The continue token is opaque.
//   - Errors are {"error":{"code":...,"message":...,"retryable":...}} with
//     the HTTP status of the code (see the Code constants); a 400 names the
//     offending query parameter in error.parameter.
//   - Fields are only ever added within /api/v1; a client ignores fields it
//     does not know. An incompatible change needs /api/v2.
//
// Capacity and Counters, their conversions (CapacityFrom, CountersFrom)
// and the copy of the Node fields that mirror cluster.Record's are
// generated from internal/cluster/record.go (types_gen.go, convert_gen.go;
// go generate ./internal/cluster/ ./internal/apiv1/, or make generate): a
// counter added to cluster.Counters reaches the API with no edit here.
// Event, the wire form of a coordinator's event, is generated the same way
// from the store's node event (internal/state/events.go: state.NodeEvent
// and its types; event_gen.go), and admin's conversion with it.
//
// The OpenAPI 3 document of the API is embedded (OpenAPI) and served at
// /api/v1/openapi.json. It is checked in as two files: openapi.json,
// written by hand, and openapi_schemas_gen.json, the schemas of Capacity,
// Counters and Event that the generator writes (descriptions already there
// are kept; a new member takes its Go doc comment, a new event type joins
// the enum); OpenAPI merges the second into the first's components once.
//
// Client errors: every method returns either an *APIError (the server
// answered with a JSON error) or an error wrapping ErrUnavailable (no base
// URL could be reached). errors.Is classifies both: ErrUnavailable (no
// server reachable, or 503 from the last one tried), ErrUnauthorized (401
// or 403), ErrNotFound (404) and ErrBadRequest (400). A Client is safe for
// concurrent use.
package apiv1

//go:generate go run ../tools/recordgen -pkg apiv1
