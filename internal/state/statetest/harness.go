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
	// LeaseTTL is the lease the suite uses in expiry cases: short, but one
	// the backend honours (etcd and Kubernetes count whole seconds).
	LeaseTTL time.Duration
	// Fault causes f and returns the store to use while it lasts (the same
	// Store, or one built with bad credentials) and a function that restores
	// service. Operations through the returned store must fail with the
	// fault's sentinel error within the suite's deadline.
	Fault func(t testing.TB, f Fault) (faulty state.Store, restore func())
	// Compact discards the backend's watch history up to its current
	// revision, so a watch from an older revision ends with ErrCompacted.
	Compact func(t testing.TB)
}

// Factory builds a harness for one test case. It registers its own cleanup
// with t.Cleanup.
type Factory func(t *testing.T) *Harness
