// Command recordgen writes the code that spells the node record's schema
// (internal/cluster/record.go: Record and the structs it nests) and the
// node event's (internal/state/events.go: state.NodeEvent and the
// NodeEventType constants) from the struct definitions and their json
// tags, so that a field is declared once:
//
//   - internal/cluster/append_gen.go: appendRecordLabels, the encoder of the
//     heartbeat path, every member in field order with its omitempty rule;
//   - internal/cluster/scan_gen.go: the member-name tables and the per-field
//     decode of the canonical scanner;
//   - internal/apiv1/types_gen.go and convert_gen.go: the /api/v1 mirrors
//     of the nested objects (Capacity, Counters), their conversions, and the
//     copy of every Record field apiv1.Node has under the same name and type;
//   - internal/apiv1/event_gen.go and internal/admin/event_gen.go: the
//     /api/v1 Event (every NodeEvent field but the cluster ID, the time in
//     Unix ms, beside the coordinator's sequence number) and admin's
//     conversion to it;
//   - internal/apiv1/openapi_schemas_gen.json: the OpenAPI schemas of
//     Capacity, Counters and Event (the event types as the enum of
//     "type"), which the hand-written openapi.json names and
//     apiv1.OpenAPI merges in. Descriptions and hand-set members (enum,
//     pattern, minimum) already in the file are kept; a member the
//     generator would drop is an error.
//
// What is not a plain scalar stays hand-written beside the output and is
// called by it: string escaping (appendString), the labels map
// (appendLabels, scanner.labels), string lists (appendStrings,
// scanner.strings), the interning of named string types (internRole,
// internHealth: intern<Type>) and the derived Node fields. A field of a
// type the generator does not know is an error, not a guess.
//
// It runs from go generate in internal/cluster (-pkg cluster),
// internal/apiv1 (-pkg apiv1) and internal/admin (-pkg admin); `make
// generate` runs them:
//
//	go generate ./internal/cluster/ ./internal/apiv1/ ./internal/admin/
//
// Invariants:
//
//   - Deterministic: the output depends only on record.go, events.go,
//     apiv1's types.go (the Node struct) and the schemas file's previous
//     text, never on map order or the clock,
//     so TestGeneratedUpToDate can compare it with the checked-in files
//     byte for byte (it runs the generator in memory).
//   - The encoder it writes is what encoding/json writes for the structs:
//     fields in declaration order, omitempty as encoding/json applies it
//     ("", 0, false, nil or empty; never a struct), the first member of a
//     nested object required to be always present. No reflection: the
//     heartbeat path's budget is the reason the code is generated rather
//     than computed at run time.
//   - Each Go file it writes starts with the standard "Code generated ...
//     DO NOT EDIT." line and is gofmt'd.
package main
