// Package list implements `talonctl nodes list`: NewCmdList parses the
// flags into ListOptions, listRun fetches every page of /api/v1/nodes and
// prints it (table, wide, name, json, yaml or a template), once or, with
// --watch, every --interval.
//
// Invariants:
//
//   - Selectors fail early. -l is parsed with the API's label-selector
//     parser and sent to the server in canonical form; --field-selector is
//     parsed with the Kubernetes field parser, checked against
//     SelectableFields and the allowed values of role, health and ready,
//     and applied here to the listing. A bad value of either is a usage
//     error naming the flag, the value and the rule, before any request.
//   - One listing is one object. Pages are followed to the end; the raw
//     formats (json, yaml, templates) print the last page's metadata with
//     every page's items, in the printed order, and an empty continue
//     token. Sorting (--sort-by) and field selection are applied to the
//     decoded items and the raw items alike.
//   - Output streams. Results go to Out; "No nodes found.", stale-data
//     warnings and retried watch errors go to ErrOut. Times are relative on
//     a terminal and absolute RFC 3339 UTC when piped.
//   - Watch. On a terminal each listing is drawn into a buffer and written
//     in one piece, replacing the screen; otherwise listings are appended
//     (yaml separated by ---). Unavailable and generic failures are shown
//     and retried; authentication and usage errors end the watch. It
//     returns nil when its context ends.
//   - Only /api/v1. The package speaks to the cluster through apiv1.Client
//     and imports no server package (internal/deptest enforces it).
package list
