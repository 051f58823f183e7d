package kube

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// writeHold holds the store's Lease writes (POST, PUT, DELETE) at the
// client until released, so a real write to the real API server stays in
// flight for as long as a test needs. Reads pass.
type writeHold struct {
	held    chan struct{} // receives once per write that reached the hold
	release chan struct{} // closed to let the writes through
	once    sync.Once
}

func newWriteHold() *writeHold {
	return &writeHold{held: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *writeHold) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/leases") {
			h.held <- struct{}{}
			select {
			case <-h.release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		return rt.RoundTrip(r)
	})
}

func (h *writeHold) open() { h.once.Do(func() { close(h.release) }) }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWriteAdmission checks the write limit against a real kube-apiserver:
// with one write in flight and a limit of one, the next write and removal
// wait AdmissionWait, fail with a retryable ErrUnavailable that names the
// limit, write nothing and are counted; reads still pass; once the slot
// frees, writes succeed again.
func TestWriteAdmission(t *testing.T) {
	k := startKube(t)
	ns := k.namespace(t, "admission")
	c := k.applyRBAC(t, ns)
	hold := newWriteHold()
	t.Cleanup(hold.open)
	reg := prometheus.NewRegistry()
	const wait = 150 * time.Millisecond
	s := k.newStore(t, c.token, ns, func(o *Options) {
		o.RESTConfig.WrapTransport = hold.wrap
		o.MaxInflightWrites, o.AdmissionWait, o.Registerer = 1, wait, reg
	})
	clusterID := uniqueCluster(t)
	first := record(clusterID, cluster.RoleWorker, "first", "inc-1", 1)
	second := record(clusterID, cluster.RoleWorker, "second", "inc-1", 1)
	ctx := testCtx(t)

	done := make(chan error, 1)
	go func() {
		_, err := s.UpsertNode(ctx, first, 30*time.Second)
		done <- err
	}()
	<-hold.held // the first write is at the API server's door, holding the one slot
	if got := testutil.ToFloat64(s.writes.inflight); got != 1 {
		t.Fatalf("writes in flight = %v, want 1", got)
	}

	start := time.Now()
	_, err := s.UpsertNode(ctx, second, 30*time.Second)
	waited := time.Since(start)
	if !errors.Is(err, state.ErrUnavailable) || !state.Retryable(err) {
		t.Fatalf("upsert past the limit: error %v, want a retryable ErrUnavailable", err)
	}
	for _, want := range []string{"kube upsert", "kube-max-inflight-writes limit 1", "kube-admission-wait 150ms", "retry after a backoff"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if waited < wait {
		t.Errorf("refused after %s, want at least the admission wait %s", waited, wait)
	}
	if _, err := k.admin.CoordinationV1().Leases(ns).Get(ctx, LeaseName(second.Key()), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease of the refused write: %v, want NotFound (nothing written)", err)
	}
	if _, err := s.RemoveNode(ctx, first.Key(), "inc-1"); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("remove past the limit: error %v, want ErrUnavailable", err)
	}
	if got := testutil.ToFloat64(s.writes.refusals); got != 2 {
		t.Fatalf("refusals = %v, want 2", got)
	}
	// Reads take no slot.
	if _, err := s.Snapshot(ctx, clusterID); err != nil {
		t.Fatalf("snapshot while writes are saturated: %v", err)
	}
	if err := s.CheckReady(ctx); err != nil {
		t.Fatalf("check ready while writes are saturated: %v", err)
	}

	hold.open()
	if err := <-done; err != nil {
		t.Fatalf("held write: %v", err)
	}
	if res, err := s.UpsertNode(ctx, second, 30*time.Second); err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("upsert after the slot freed: %+v, %v", res, err)
	}
	snap, err := s.Snapshot(ctx, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Records) != 2 {
		t.Fatalf("snapshot holds %d records, want 2", len(snap.Records))
	}
	if res, err := s.RemoveNode(ctx, first.Key(), "inc-1"); err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("remove after the slot freed: %+v, %v", res, err)
	}
	if got := testutil.ToFloat64(s.writes.inflight); got != 0 {
		t.Fatalf("writes in flight after all finished = %v, want 0", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}

// TestWriteAdmissionWaits checks that a write arriving at a full store
// waits for the slot and is admitted when it frees within AdmissionWait,
// and that a caller's context ending first is reported as such, not as a
// refusal.
func TestWriteAdmissionWaits(t *testing.T) {
	k := startKube(t)
	ns := k.namespace(t, "admission")
	c := k.applyRBAC(t, ns)
	hold := newWriteHold()
	t.Cleanup(hold.open)
	s := k.newStore(t, c.token, ns, func(o *Options) {
		o.RESTConfig.WrapTransport = hold.wrap
		o.MaxInflightWrites, o.AdmissionWait = 1, 10*time.Second
	})
	clusterID := uniqueCluster(t)
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "first", "inc-1", 1), 30*time.Second)
		done <- err
	}()
	<-hold.held

	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := s.UpsertNode(cctx, record(clusterID, cluster.RoleWorker, "second", "inc-1", 1), 30*time.Second)
	cancel()
	if errors.Is(err, state.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("upsert whose context ended while waiting: error %v, want the context's deadline", err)
	}
	if got := testutil.ToFloat64(s.writes.refusals); got != 0 {
		t.Fatalf("refusals = %v, want 0", got)
	}

	second := make(chan error, 1)
	go func() {
		_, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "second", "inc-1", 1), 30*time.Second)
		second <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the second write queue for the slot
	hold.open()
	if err := <-done; err != nil {
		t.Fatalf("held write: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("write that waited for the slot: %v", err)
	}
}
