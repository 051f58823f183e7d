// Package pki is Talon's mutual TLS: the credentials a process presents,
// the identities they name, the TLS configurations of the control and data
// planes, and a small certificate authority for development and for
// deployments without a PKI of their own.
//
// # Identities
//
// A certificate names one identity: its Subject CommonName is the node ID
// and its Subject OrganizationalUnit the role (coordinator, worker or
// client). Exactly one recognised role must be present. Peers are checked
// against the configured CA bundle and by that identity, not by host name:
// a worker is reached at whatever address its record advertises, and the
// record is trusted only because the coordinator bound it to the worker's
// certificate (see coordinator: identity binds writes).
//
// # Reloading
//
// A Source holds the CA bundle, certificate and key read from files. It
// looks at the files again at most once per CheckInterval, during a
// handshake (no goroutine), and swaps in the new material when all of it
// loads and the key matches the certificate; until then the old material
// stays in use and the failure is logged once per change. Operators rotate
// certificates by replacing the files: new connections use the new
// certificate, established ones are not disturbed.
//
// # Versions and suites
//
// Every Talon listener (control, data and admin) speaks TLS 1.2 or 1.3;
// TLS 1.2 is limited to ECDHE key exchange with AES-GCM or
// ChaCha20-Poly1305 (no CBC, no SHA-1 MACs, no static RSA). Clients keep
// a session cache so reconnections resume instead of doing a full
// handshake.
//
// # Concurrency
//
// A Source and the configurations it returns are safe for concurrent use.
package pki
