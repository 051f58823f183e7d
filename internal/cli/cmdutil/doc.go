// Package cmdutil holds what every talonctl command shares: the Factory
// (streams, environment, clock, connection flags), IOStreams with terminal
// and colour detection, the resolution of connection settings into an
// /api/v1 client, exit codes, flag-value errors, output formats, the table
// printer and dynamic shell completion. Command packages (and `talonctl
// top`) import this package, never package cli, so there is no import
// cycle.
//
// Invariants:
//
//   - Connection settings resolve per setting in the order flag >
//     environment (TALONCTL_SERVER, TALONCTL_TOKEN, TALONCTL_CONTEXT) >
//     context of the configuration file > default. A token is never
//     printed: Connection.String names only where it came from.
//   - Every error a command returns maps to one exit code through
//     ExitCode: usage 2, cluster unavailable 3, authentication refused 4,
//     anything else 1. A bad flag value is a usage error that names the
//     flag, the value and the allowed values.
//   - Results go to IOStreams.Out, messages to IOStreams.ErrOut. Colour is
//     used only when Out is a terminal, NO_COLOR is unset and the terminal
//     has colours; widths of coloured cells are measured without escapes.
//   - The clients built from one Factory share an apiv1.ServerMemory: the
//     server that last answered is tried first and a silent one costs its
//     attempt deadline once per execution. Factory.Close saves it to a
//     per-connection cache file under $XDG_CACHE_HOME/talonctl/ (temporary
//     file and rename; valid ServerCacheTTL), which the next execution
//     loads; a missing, corrupt, foreign or expired file is ignored, and a
//     failure to write it too: it is a cache, never an error.
//   - Dynamic completion never writes to the streams and gives up after
//     CompletionTimeout.
//
// A Factory serves one command execution and is not safe for concurrent
// use; Factory.Close releases the idle connections of the clients it built.
package cmdutil
