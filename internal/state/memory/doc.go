// Package memory is the in-process state.Store: the backend for development,
// unit tests and explicit single-coordinator mode (ADR 0001 section 4). It has
// the full contract semantics, so it also runs the statetest contract suite,
// and it can inject the backend faults callers must survive.
//
// Invariants:
//
//   - One global revision counter, starting at 1, advances by exactly one for
//     every change (an accepted upsert, a removal, one expired lease), and the
//     change is published, under mu, to the store's state.FanOut under that
//     revision. Revision tokens are that counter in decimal; callers treat
//     them as opaque.
//   - Watch is served by state.FanOut, the fan-out the reflector of etcd and
//     Kubernetes runs too: its ring is the watch history, bounded by
//     Options.HistoryLimit; trimming it, and Compact, advance its floor. A
//     watch from a revision older than the floor ends with
//     state.ErrCompacted; a watcher that falls HistoryLimit events behind
//     ends with state.ErrUnavailable, the slow-watcher rule of every
//     backend.
//   - Leases are per record: an accepted upsert sets expiry to now+leaseTTL
//     against Options.Clock. Expiry is lazy and deterministic: every
//     operation first expires every record whose expiry is not after now,
//     each as its own EventDelete. An open watch additionally calls Sweep
//     every Options.SweepInterval (a goroutine beside its delivery), so a
//     watcher sees an expiry even when no other operation touches the store. There is no other timer. A late
//     mark (ProposeTransition) keeps the record's expiry as it was.
//   - Unobserved time does not count. With Options.StallThreshold on (the
//     default with the real clock), a step of the clock longer than it
//     between two observations (operations, sweeps) counts only as the
//     threshold: every expiry moves out by the rest, so a process stopped
//     or a machine paused for longer than the leases expires nothing when
//     it resumes, as etcd's lessor extends leases on a leader change.
//   - Stored records are private clones, never mutated after they are
//     stored: a write replaces the pointer. Snapshots and watch events share
//     those immutable records (the state contract forbids callers to modify
//     them); WriteResult.Record is a fresh clone the caller may keep.
//   - Each cluster keeps its records in a slice sorted by role then node ID,
//     maintained on write, so Snapshot is one slice copy.
//
// Writes (UpsertNode, RemoveNode, ProposeTransition) run state.Write over
// the store's slots with mu held, so their compare-and-swap never loses.
//
// Concurrency: a Store is safe for concurrent use. Writers (upsert, remove,
// transitions, sweep, compaction) hold mu exclusively; Snapshot holds it shared unless a
// lease is due to expire. Writers never wait for watchers: the fan-out
// queues each watcher's events under its own lock (taken after mu) and each
// watch has its own goroutine that hands them over. Every such goroutine
// ends when its context ends, when it delivers a terminal error, or when
// Close is called (a watch's sweeper ends with it); Close waits for them.
//
// Errors: every error wraps a state sentinel (ErrInvalidRecord,
// ErrRecordTooLarge, ErrCompacted, ErrUnavailable, ErrClosed, or the injected fault) or the
// caller's context error.
package memory
