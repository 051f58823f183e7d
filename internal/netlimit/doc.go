// Package netlimit bounds the connections a listener holds before and
// after its peers authenticate, so that connections without credentials
// cannot take the slots, descriptors and memory that authenticated peers
// need.
//
// A Listener counts every connection it hands out until it is closed, in
// two classes: pending (accepted, the peer not yet authenticated) and
// established (Promote was called, after a TLS handshake that verified the
// peer, or the first request on a listener without client
// authentication). At accept:
//
//   - a connection from an address that holds Limits.MaxPerAddress, or
//     Limits.MaxPendingPerAddress pending, is closed and counted through
//     OnRefuse;
//   - when Limits.MaxPending are pending, or Limits.Max are open, the
//     oldest pending connection of the address with the most pending is
//     closed (counted as "pending") to make room. A peer that completes
//     its handshake in milliseconds is never the one waiting longest at
//     the heaviest address, so floods of connections that never
//     authenticate cannot keep fresh authenticated peers out; when every
//     connection is established, a new one past Max is refused.
//
// Keyed (and Buckets, a token bucket per key on it) is the one bounded
// map of per-key state behind a listener's per-client and per-principal
// limits: at most a fixed number of keys, the idle dropped first, then the
// least recently used, so that a flood of new keys (addresses) costs
// bounded memory and no key's state outlives its use for long.
//
// The server bounds how long a connection may stay pending (its handshake
// deadline); this package only counts. A Listener is safe for concurrent
// use; Conn's Promote and Close may be called from any goroutine, each
// takes effect once.
package netlimit
