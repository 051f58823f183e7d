// Package security holds the end-to-end tests of Talon's defences on real
// talon processes (package talontest): mutual TLS on the control plane
// (attacks refused, certificate rotation, old TLS versions refused by the
// listeners as openssl sees them), attested workers on Kubernetes, deny
// lists that revoke credentials on every coordinator, cordon and drain
// that never reach a worker's address, floods of unauthenticated
// connections kept bounded, the admin listener's per-token budgets (log
// lines, event watches), the OTLP endpoint's password kept out of the
// output, and lying, colluding or failing owners that never make a read
// return wrong bytes or fail (an owner they silence is no consent; on a
// real S3 server whose only checksum is a CRC, a forgery with the same
// CRC is caught by comparing every block with the store), and
// per-credential data connection budgets that keep one client, or another
// worker, from taking a worker's data port. Every test is skipped
// under -short.
package security
