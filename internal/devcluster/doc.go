// Package devcluster is `talon dev`: a coordinator and workers run in one
// process on loopback, on the memory state backend, with mutual TLS from a
// throwaway CA like production. It also owns the layout of a dev
// directory, which `talon get --dir`, `talon bench lookups --dir` and
// `talon worker --dev-dir` read: the CA and credentials in tls/, the
// control address in coordinators, the admin token, talonctl's
// configuration file talonctl.yaml (context "dev": every coordinator's
// admin URL and the token file, so that talonctl needs only
// TALONCTL_CONFIG), the sample blobs and the caches.
//
// Invariants:
//
//   - devcluster arranges processes and does not wire them: Roles (package
//     app) builds each from its configuration exactly as a standalone
//     process is built, so a dev cluster runs production's wiring.
//   - Run returns only once every process it started has stopped: the
//     workers first, so that they deregister while the coordinator still
//     answers, then the coordinator. Processes built but never run are
//     closed on every error path.
//   - A dev directory keeps its CA across runs (so credentials handed out
//     earlier stay valid); each run issues every credential again.
//   - Errors name the flag or file at fault; Options.Validate's are usage
//     errors for the caller to mark as such.
package devcluster
