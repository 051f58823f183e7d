// Package integration holds end-to-end tests that run real talon processes
// (built once per test binary) on loopback against a real etcd (from
// internal/testenv) or the memory backend: active-active coordinators,
// worker membership, failure and recovery, and reads through the caches.
// Every test is skipped under -short.
package integration
