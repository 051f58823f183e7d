// Package faults holds the end-to-end tests of failure and recovery on
// real talon processes (package talontest) and real stores (etcd,
// kube-apiserver, from internal/testenv): liveness agreement between
// active-active coordinators, store faults and outages, crash loops,
// mismatched timing, the fault schedule and the cost of store blips,
// failover of clients from a hung coordinator, recovery after an etcd
// restart, signals and drains, killed and silent workers, a missing
// coordinator, and events that survive restarts. `make faults` runs the
// HA fault tests with TALON_FAULTS=full (ten rolling restarts per backend)
// and writes the schedule's table to TALON_FAULT_TABLE. Every test is
// skipped under -short.
package faults
