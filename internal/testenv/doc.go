// Package testenv starts real etcd, kube-apiserver and S3 (versitygw)
// processes on loopback for Talon's integration tests. It is imported only from _test.go files
// and from test support (internal/testsupport/talontest).
//
// The binaries are built from source by build-servers.sh (nested modules
// etcdbin/ and kubebin/, so server dependencies stay out of Talon's go.mod)
// into a cache outside the repository. `make test` runs the script once and
// exports TALON_ETCD_BIN and TALON_KUBE_APISERVER_BIN; a plain `go test` runs
// the script itself on first use, which costs several minutes when the cache
// is cold and a fraction of a second when it is warm. The helm binary that
// the chart tests in deploy/ run is built the same way by build-helm.sh
// (nested module helmbin/, env TALON_HELM_BIN), with a cache key of its own,
// and so is versitygw, the S3 server the blob store tests run (StartS3), by
// build-s3.sh (nested module s3bin/, env TALON_S3_BIN).
//
// Invariants:
//
//   - Every process is started with a t.Cleanup that kills it (SIGKILL, even
//     when paused) and waits for it to exit, so a failing or panicking test
//     leaves no process behind. On Linux the children also get SIGKILL when
//     the test binary dies (Pdeathsig), which covers `go test -timeout`.
//   - Everything a server writes (data dir, certificates, keys, token file,
//     logs) lives under t.TempDir(), which the testing package removes after
//     the kill cleanup has run.
//   - Server output goes to a log file in that directory, never to the test's
//     stdout. When the test has failed, the cleanup copies the log's tail into
//     t.Log; a start that fails includes the tail in its t.Fatal message.
//   - Ports are picked at random on 127.0.0.1 and kept for the life of the
//     server: Stop then Start restarts on the same ports and data.
//   - The only goroutines this package starts are one per running process,
//     each waiting for its process to exit; they end when the process does,
//     at the latest in the cleanup. Every HTTP transport used for health
//     checks is closed before the check returns, and every etcd client a
//     helper returns is closed in a cleanup, so goleak stays quiet.
//
// Concurrency: Start, Stop and the helpers that take a testing.TB call
// t.Fatal and so must run on the test's goroutine. Kill, Pause and Resume only
// send signals, report problems with t.Errorf, and may be called from any
// goroutine (for example from a fault injector running beside a workload).
//
// Failures are reported through the testing.TB passed in; nothing here
// returns an error a test would have to check.
package testenv
