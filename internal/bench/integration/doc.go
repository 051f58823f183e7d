// Package integration holds the measurements of package bench on real
// talon processes (package talontest) and real stores: the report of
// `make bench-report` (TestBenchReport, TestBenchReportDataPath,
// TALON_BENCH_REPORT_FILE), its shaped-store rows alone (`make
// bench-shaped`, TestBenchReportShaped: S3 behind internal/testsupport/
// shapeproxy, and TestBenchShapedProfile, their profile), the scale rows
// of `make bench-scale`, the fleet rows of `make bench-fleet`
// (TestBenchFleet: coordinator processes and simulated workers in fleet
// processes of their own at the default heartbeat interval, and
// TestFleetHeartbeatsEtcd, a small fleet that every test run checks)
// (TestBenchScale: many workers on etcd and Kubernetes, top and the UI in
// Chromium), `talon bench` end to end, the Kubernetes heartbeat benchmark
// and store bytes, lookups over the protocol and the cost of mutual TLS
// (go test -bench). Tests never assert on wall-clock speed; each is
// skipped under -short, and the long ones without their TALON_BENCH_*
// variable.
package integration
