package statetest

import (
	"testing"
	"time"

	"github.com/talonhq/talon/internal/state"
)

// Fault is a failure a harness causes for real in its backend.
type Fault int

// Faults every backend must be able to cause. A backend that cannot inject
// one in-process causes it for real: stop the server, pause it, present
// wrong credentials, revoke a role.
const (
	FaultUnavailable      Fault = iota + 1 // the backend cannot be reached
	FaultTimeout                           // the backend accepts connections but does not answer
	FaultUnauthenticated                   // the credentials are rejected
	FaultPermissionDenied                  // authenticated, but not allowed to touch Talon's records
)

// String names the fault.
func (f Fault) String() string {
	switch f {
	case FaultUnavailable:
		return "unavailable"
	case FaultTimeout:
		return "timeout"
	case FaultUnauthenticated:
		return "unauthenticated"
	case FaultPermissionDenied:
		return "permission_denied"
	}
	return "invalid"
}

// Harness is what a backend hands the contract suite for one test case.
type Harness struct {
	// Store is the store under test. The suite uses cluster IDs unique to
	// each case, so a harness may share one server across cases.
	Store state.Store
	// Advance moves the backend's clock forward by at least d. The memory
	// backend moves its injected clock; real backends sleep.
	Advance func(d time.Duration)
	// Now is the backend's clock, for the event log's age bound; nil means
	// time.Now (real backends).
	Now func() time.Time
	// LeaseTTL is the lease the suite uses in expiry cases: short, but one
	// the backend honours (etcd and Kubernetes count whole seconds). The
	// suite allows a record to outlive its lease by less than LeaseTTL/2
	// (it checks that a duplicate heartbeat did not extend the lease), so
	// choose a TTL of more than twice the backend's expiry lag.
	LeaseTTL time.Duration
	// LeaseExpiry reports that the backend deletes a record on its own
	// when its lease runs out (memory's TTL, etcd's lease). Kubernetes
	// Leases have no such expiry: a record goes only when a coordinator's
	// ProposeTransition(TransitionExpire) or a removal deletes it, and the
	// suite checks that no reader's clock drops it before.
	LeaseExpiry bool
	// Fault causes f and returns the store to use while it lasts (the same
	// Store, or one built with bad credentials) and a function that restores
	// service. Operations through the returned store must fail with the
	// fault's sentinel error within the suite's deadline: each runs with a
	// 3 s context and must return within 5 s after it (UpsertNode,
	// RemoveNode, Snapshot and CheckReady must wrap the sentinel, with
	// state.Code equal to f.String(); a Watch must deliver no events and
	// end with the sentinel or close when its context ends). After restore,
	// h.Store must pass CheckReady within 60 s and still hold every record
	// accepted before the fault.
	Fault func(t testing.TB, f Fault) (faulty state.Store, restore func())
	// Compact discards the backend's watch history up to its current
	// revision, so a watch from an older revision ends with ErrCompacted.
	Compact func(t testing.TB)
	// StableRevisions reports that the backend's revision moves only when
	// the suite writes, so two snapshots with no write between them have
	// equal revisions and a duplicate write reports the unchanged revision.
	// The memory backend sets it. etcd and Kubernetes share one revision
	// counter with every other writer of the server (other objects, lease
	// expiries left over from earlier cases), so their harnesses leave it
	// false; the suite then checks only that equal revisions mean equal
	// contents and that an accepted write changes the revision.
	StableRevisions bool
	// Peer opens another store on the same backend, as a second coordinator
	// would, whose clock reads offset ahead of the harness's (behind when
	// negative). The suite uses it to check that clock skew between
	// coordinators changes neither ordering nor liveness. The memory
	// backend is one process with one clock, so its Peer is its Store.
	Peer func(t testing.TB, offset time.Duration) state.Store
	// SmallWatchBuffer, if set, opens another store on the same backend
	// whose watchers may fall at most n events behind (its fan-out's
	// ring: memory's HistoryLimit, the snapshot cache's ring). The suite
	// checks there that a watcher which stops reading ends with
	// ErrUnavailable, the one slow-watcher rule of every backend. A
	// backend whose watch holds the server's stream back instead (etcd
	// and Kubernetes without the snapshot cache) leaves it nil.
	SmallWatchBuffer func(t testing.TB) (s state.Store, n int)
}

// Factory builds a harness for one test case. It registers its own cleanup
// with t.Cleanup.
type Factory func(t *testing.T) *Harness
