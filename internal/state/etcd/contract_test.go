package etcd

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/statetest"
	"github.com/talonhq/talon/internal/testenv"
)

// contractServer is one etcd with authentication on, shared by the cases
// of one contract run (they run one after another and use their own
// cluster IDs). The store authenticates as a user whose role may only
// touch the store's prefix, as in production.
type contractServer struct {
	e        *testenv.Etcd
	opts     Options
	user     string
	password string
	noAccess sync.Once // the no-access user, created on first use
}

const contractUser = "talon"

func startContractServer(t *testing.T, tlsOn, cache bool) *contractServer {
	e := testenv.StartEtcd(t, testenv.EtcdOptions{Auth: true, TLS: tlsOn, ClientCertAuth: tlsOn})
	cs := &contractServer{e: e, user: contractUser, password: "talon-password"}
	e.AddPrefixUser(t, cs.user, cs.password, DefaultPrefix+"/")
	o := optionsFor(e, cache)
	o.Username, o.Password = cs.user, cs.password
	cs.opts = o
	return cs
}

// factory builds one harness per case: a new store on the shared server.
func (cs *contractServer) factory(t *testing.T) *statetest.Harness {
	s := newStore(t, cs.opts)
	h := &statetest.Harness{
		Store:       s,
		Advance:     func(d time.Duration) { time.Sleep(d) },
		LeaseTTL:    2 * time.Second, // etcd counts whole seconds; this server's floor is 1s
		LeaseExpiry: true,
		Fault:       func(t testing.TB, f statetest.Fault) (state.Store, func()) { return cs.fault(t, s, f) },
		Compact:     func(t testing.TB) { cs.e.Compact(t, 0) },
		Peer: func(t testing.TB, offset time.Duration) state.Store {
			o := cs.opts
			o.Clock = func() time.Time { return time.Now().Add(offset) }
			return newStore(t, o)
		},
	}
	if cs.opts.CacheSnapshots {
		h.SmallWatchBuffer = func(t testing.TB) (state.Store, int) {
			const n = 32
			o := cs.opts
			o.ringSize = n
			return newStore(t, o), n
		}
	}
	return h
}

// fault causes f for real.
func (cs *contractServer) fault(t testing.TB, s *Store, f statetest.Fault) (state.Store, func()) {
	t.Helper()
	switch f {
	case statetest.FaultUnavailable:
		// The process is gone: connections are refused.
		cs.e.Kill()
		return s, func() { cs.e.Start() }
	case statetest.FaultTimeout:
		// The process is frozen: connections stay open, nothing answers.
		probe := cs.e.Client(t)
		cs.e.Pause()
		waitUnresponsive(t, probe)
		return s, cs.e.Resume
	case statetest.FaultUnauthenticated:
		// The store's password is no longer the user's: etcd invalidates
		// the user's tokens, and the client's re-authentication fails.
		cs.changePassword(t, cs.password+"-changed")
		return s, func() { cs.changePassword(t, cs.password) }
	case statetest.FaultPermissionDenied:
		// A user that authenticates but whose role grants nothing.
		const user, password = "talon-no-access", "no-access-password"
		cs.noAccess.Do(func() { cs.e.AddNoAccessUser(t, user, password) })
		o := cs.opts
		o.Username, o.Password = user, password
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		denied, err := New(ctx, o)
		if err != nil {
			t.Fatalf("store for %s: %v", user, err)
		}
		return denied, func() {
			if err := denied.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	}
	t.Fatalf("unknown fault %s", f)
	return nil, nil
}

// waitUnresponsive returns once etcd stops answering: SIGSTOP takes effect
// asynchronously, and a request racing it could still be answered.
func waitUnresponsive(t testing.TB, probe *clientv3.Client) {
	t.Helper()
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := probe.Get(ctx, "probe", clientv3.WithSerializable())
		cancel()
		if err != nil {
			return
		}
	}
	t.Fatal("etcd still answers after SIGSTOP")
}

func (cs *contractServer) changePassword(t testing.TB, password string) {
	t.Helper()
	c := cs.e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.UserChangePassword(ctx, cs.user, password); err != nil {
		t.Fatalf("change password of %s: %v", cs.user, err)
	}
}

// TestContract runs the whole contract suite against a real etcd: with the
// snapshot cache over TLS with client certificates, and with plain range
// snapshots over TCP; both with password authentication.
func TestContract(t *testing.T) {
	testenv.SkipIfShort(t)
	for _, c := range []struct {
		name  string
		tls   bool
		cache bool
	}{
		{"cache+tls", true, true},
		{"range", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := startContractServer(t, c.tls, c.cache)
			statetest.Run(t, cs.factory)
		})
	}
}
