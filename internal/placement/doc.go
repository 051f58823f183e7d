// Package placement decides which workers own a key (rendezvous, or
// highest-random-weight, hashing) and names the membership those decisions
// were built from (the PlacementVersion of ADR 0001 section 7).
//
// A coordinator turns a store snapshot into placement in two steps:
//
//	nodes, excluded := placement.Eligible(snapshot.Records, nowUnixMs, timing)
//	table, err := placement.New(nodes)        // once per membership
//	owners := table.LookupInto(key, 3, buf)   // per request
//	version := table.Version()                // sent with every answer
//
// Invariants:
//
//   - Pure. No I/O, no clock (callers pass the time in), no package-level
//     mutable state. A Table is immutable after New and safe for concurrent
//     use by any number of goroutines without locking.
//   - Deterministic across processes, builds and architectures. Results
//     depend only on the inputs: xxh3 (whose output upstream froze at
//     v0.8.0 and which zeebo/xxh3 reproduces on its scalar, SSE2, AVX2,
//     AVX-512 and NEON paths), unsigned varints, and wrap-around uint64
//     arithmetic. No map iteration, floating point, random seeds or input
//     order reach a result: New sorts its input, so two coordinators reading
//     the same snapshot return the same owners and the same Version.
//   - The canonical encoding is frozen. Version is the 64-bit xxh3 (seed 0)
//     of the nodes sorted by ID, each written as
//     uvarint(len(ID)) ID uvarint(len(Address)) Address uvarint(len(Role)) Role,
//     node after node, with nothing before, between or after. The empty set
//     is Version 0 without hashing; a non-empty set whose hash is 0 gets the
//     fixed substitute documented on Version. Changing any of this changes
//     every Version and makes coordinators of different builds disagree
//     during a rolling upgrade; golden tests pin it so that an accidental
//     change fails.
//   - The scoring function is frozen too. A Version names a membership, not
//     an algorithm: two builds that scored differently would hand out
//     different owners under the same Version and clients would keep stale
//     owners. A golden test pins the owners of fixed keys.
//   - Versions are equality tokens. Equal means "built from the same
//     membership"; any difference, in either direction, means "invalidate
//     and refresh". The package offers no ordering of versions and callers
//     must not compare them numerically.
//   - Lookup(key, n) is exactly the first n entries of Explain(key). Owners
//     are distinct nodes, ranked by score (highest first) with ties broken
//     by the lower node ID.
package placement
