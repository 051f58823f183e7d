// Package client is the Go library clients use to find the owners of a
// key and to read objects through the workers' caches: placement lookups
// against any coordinator, with failover across coordinator addresses and
// a short-lived placement cache (Client), and whole-object reads that fall
// back across a block's replicas (ObjectReader).
//
// Invariants:
//
//   - Cache rule (ADR 0001 section 7): a PlacementVersion is an equality
//     token. Every cached decision carries the placement.Version it was
//     computed from; when the client sees any different version (a lookup
//     answer or an EpochBump push), every entry from another version is
//     dropped. Versions are never compared for order, and a lookup answer
//     that was in flight while another version was observed is returned
//     but neither adopted nor cached. Independently, an entry is refreshed
//     when its TTL passes and when the caller reports a connection
//     failure, a wrong owner or a missing object for it (Invalidate). A
//     worker's version (in a wrong-owner answer) is never observed: only
//     coordinators speak for the membership.
//   - Failover. A call makes passes over the coordinator addresses, from
//     the preferred one (the last that answered anything but a refusal),
//     at most Options.Retries+1 passes with jittered backoff between
//     passes only. Within a pass the next address is tried at once after
//     a connection failure, an attempt that outlived its own deadline, or
//     a refusal (not_ready, draining, unavailable); another retryable
//     answer (the shared store's: timeout, conflict, no_workers) ends the
//     pass, and a non-retryable one ends the call. Every attempt has a
//     deadline (Options.AttemptTimeout: by default a third of what
//     remains of the call's, at least 250 ms, 1 s for a call without a
//     deadline), so a hung coordinator costs one attempt deadline, not
//     the call; the last attempt gets whatever remains. A pooled
//     connection that fails at once as a closed one does (EOF, reset,
//     broken pipe: its coordinator restarted or closed it while it idled)
//     is no failure of that coordinator: the address's idle pool is
//     closed and the request redialled once, within the same attempt. The
//     same holds for a pooled connection that carries a coordinator's
//     drain notice (the draining code pushed before it closes its
//     connections); on a connection in use, the notice is a refusal and
//     the call moves on. So one pass survives a restart, a drain, a death
//     or a hang of one coordinator.
//   - Domain types at the edge. Answers carry placement.Owner and
//     placement.Version; the wire form (protocol.Owner, the u64 version)
//     is converted in one place, placementFrom.
//   - Lifecycle. New validates its options and connects lazily; Close
//     closes the pooled connections, after which calls fail. Watch runs
//     on the caller's goroutine until its context ends, reconnecting with
//     jittered backoff; nothing in the package starts a goroutine that
//     outlives the call that started it.
//   - Concurrency. A Client is safe for concurrent use: its mutex guards
//     the pools, the preferred coordinator, the observed version and the
//     cache, and is never held across a dial or a call. Connections are pooled per
//     coordinator; each protocol.Conn serves one call at a time. An
//     ObjectReader may run ReadObject concurrently once its fields are set;
//     its fields must not change after the first read.
//   - Errors. A coordinator's refusal is returned as the *protocol.Error it
//     sent (check it with protocol.IsCode); when no coordinator could be
//     reached the error wraps ErrNoCoordinator and the last connection
//     error; context errors are returned as they are. ObjectReader's
//     errors name the object and block and wrap the cause: ErrVerification
//     when workers disagree about a block (and no Source settles it) or
//     too few vouched for it, ErrChecksum when the object fails the store's
//     checksum, ErrObjectChanged when the object changed during the read,
//     the lookup's error, or, when nothing could serve a block, every
//     source tried and the last cause (datav1's sentinels, such as
//     datav1.ErrNotFound).
//   - Verification (ObjectReader.Verify, Source): a block is accepted
//     when a strict majority of the workers placement names (at least
//     two) vouch for its SHA-256, every one of them answered and none
//     disagrees: a silent owner is no consent (the block goes to the
//     store, or the read fails naming it). With a Source, disputed,
//     unservable or unconsented blocks are read from the store and the
//     object is checked against the store's checksum; only a
//     cryptographic one (blob.Checksum.Cryptographic) is evidence, so
//     with a CRC, as with none, every block is compared with the store's
//     bytes. A worker is named as wrong only when the store's bytes
//     contradict it.
//   - Layering. The package links neither runtime: no worker, coordinator
//     or state import (internal/deptest enforces it).
package client
