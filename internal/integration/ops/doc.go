// Package ops holds the end-to-end tests of what an operator runs and
// sees, on real talon processes (package talontest): talonctl workflows,
// the shipped Prometheus alerts (promtool and a live Prometheus), systemd
// notification, a full etcd recovered without a restart, compaction
// keeping the store bounded, what heartbeats cost etcd (TestStoreBytesEtcd)
// and the soak (`make soak`, TALON_SOAK), which reports store size, RSS,
// goroutines and open files over time. Every test is skipped under -short.
package ops
