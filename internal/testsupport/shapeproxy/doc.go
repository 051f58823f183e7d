// Package shapeproxy gives a store emulator on loopback the shape of a
// cloud object store: an HTTP proxy on 127.0.0.21 in front of it that
// holds every request for a first-byte latency before forwarding it,
// carries at most a set bandwidth on each client connection (each
// direction, token buckets of golang.org/x/time/rate) and serves at most a
// set number of client connections at once (golang.org/x/net/netutil's
// LimitListener: the kernel accepts more, and they wait for a slot). The
// defaults (DefaultShape) are near a real region's: 30 ms to the first
// byte, 100 MB/s per connection, a cap high enough that only a runaway
// client meets it.
//
// The data-path benchmarks of internal/bench/integration read through it
// both ways they compare (straight from the store and through workers),
// so that a read is bounded by the store's latency and per-connection
// bandwidth, as in production, rather than by the CPU a local emulator
// and its readers share.
//
// The proxy forwards requests unchanged, the Host header included, so an
// AWS Signature Version 4 made for the proxy's address verifies at the
// emulator. Only _test.go files and test support import this package.
//
// Invariants:
//
//   - Lifecycle: Start listens and serves until Close or the end of the
//     test (t.Cleanup); Close closes the listener and every connection,
//     waits for the serving goroutine and the rate waits to end, and is
//     idempotent.
//   - Latency is added once per request, before it is forwarded; bandwidth
//     is per client connection, not shared among connections, and applies
//     to every byte the connection carries (headers included).
//   - A client connection holds its slot of MaxConns until it closes, an
//     idle keep-alive one too (the proxy closes those after 20 s idle).
//
// Concurrency: a Proxy's methods are safe for concurrent use.
package shapeproxy
