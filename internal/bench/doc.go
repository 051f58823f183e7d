// Package bench holds the measurements behind `talon bench` and the
// integration report (make bench-report), so both measure the same thing:
// a closed-loop runner with percentiles, the typical worker record, the raw
// backend ceilings (an etcd compare-and-swap put with a lease, a Kubernetes
// Lease update on resourceVersion), heartbeats through coordinators over
// the control protocol, and placement lookups.
//
// Runs are closed loop (Run: each caller back to back, the ceiling) or
// open loop (RunPaced: each slot once per interval whatever the answers'
// latency, as a fleet of workers heartbeats; Fleet).
//
// Every function takes the clients or addresses it measures; the package
// starts no coordinator and opens no store of its own (the caller does, as
// a real process would). Run and the phases built on it return when their
// duration has passed; they leave nothing running. Failures are counted by
// code (Code), never returned as errors: an error return means the phase
// could not be set up.
package bench
