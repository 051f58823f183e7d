package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

var apiResources = []string{
	apiv1.PathCluster,
	apiv1.PathNodes,
	apiv1.PathNodes + "/w1",
	apiv1.PathPlacement + "?key=k&replicas=2",
}

// TestFailClosed stops the store: readiness turns 503 while liveness stays
// 200, every /api/v1 resource answers 503 with Retry-After and a retryable
// JSON error, allowStale=true answers from the last good view marked
// stale, and everything recovers when the store does.
func TestFailClosed(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	e.put(t, workerRecord("w1", nil), time.Hour)
	var before apiv1.Cluster
	e.get(t, apiv1.PathCluster).decode(t, &before)

	e.store.SetFault(fmt.Errorf("injected outage at etcd-3.internal:2379: %w", state.ErrUnavailable))
	waitFor(t, "coordinator unready", func() bool { return !e.coord.Readiness().Ready })

	if r := e.get(t, apiv1.PathReadyz); r.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	if r := e.get(t, apiv1.PathHealthz); r.status != http.StatusOK {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	for _, p := range apiResources {
		t.Run("503 "+p, func(t *testing.T) {
			r := e.get(t, p)
			if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
				t.Fatalf("status %d Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
			}
			er := r.apiError(t)
			if er.Code != apiv1.CodeNotReady || !er.Retryable || er.Message == "" {
				t.Fatalf("error %+v", er)
			}
			if strings.Contains(string(r.body), "etcd-3") {
				t.Fatalf("503 body leaks the store error: %s", r.body)
			}
		})
		t.Run("stale "+p, func(t *testing.T) {
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			r := e.get(t, p+sep+"allowStale=true")
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var m apiv1.Meta
			r.decode(t, &m)
			checkMeta(t, m, true)
			if m.Revision != before.Revision {
				t.Fatalf("stale revision %q, want the last good %q", m.Revision, before.Revision)
			}
			if !strings.Contains(string(r.body), `"stale":true`) {
				t.Fatalf("body not marked stale: %s", r.body)
			}
		})
	}
	var stale apiv1.Cluster
	e.get(t, apiv1.PathCluster+"?allowStale=true").decode(t, &stale)
	if stale.Store.Healthy || stale.Store.ErrorCode != "unavailable" || stale.PlacementVersion != before.PlacementVersion || stale.Nodes.Workers.Total != 1 {
		t.Fatalf("stale cluster %+v", stale)
	}

	t.Run("client", func(t *testing.T) {
		c, err := apiv1.NewClient([]string{e.url}, apiv1.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Cluster(context.Background())
		var ae *apiv1.APIError
		if !errors.Is(err, apiv1.ErrUnavailable) || !errors.As(err, &ae) || ae.RetryAfter != time.Second || !ae.Retryable {
			t.Fatalf("err = %v (%+v)", err, ae)
		}
		cl, err := c.Cluster(context.Background(), apiv1.AllowStale())
		if err != nil || !cl.Stale {
			t.Fatalf("AllowStale: %+v, %v", cl, err)
		}
		h, err := c.Readyz(context.Background())
		if err != nil || h.Ready() {
			t.Fatalf("readyz: %+v, %v", h, err)
		}
	})

	e.store.ClearFault()
	waitFor(t, "coordinator ready again", func() bool { return e.coord.Readiness().Ready })
	for _, p := range apiResources {
		r := e.get(t, p+map[bool]string{true: "&", false: "?"}[strings.Contains(p, "?")]+"allowStale=true")
		var m apiv1.Meta
		r.decode(t, &m)
		if r.status != 200 || m.Stale {
			t.Fatalf("%s after recovery: %d %s", p, r.status, r.body)
		}
	}
	if r := e.get(t, apiv1.PathReadyz); r.status != 200 {
		t.Fatalf("readyz after recovery: %d", r.status)
	}
}

// TestFailClosedWithoutLastGood: a coordinator that never read the store
// has nothing to serve even with allowStale.
func TestFailClosedWithoutLastGood(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll(), faultFromStart: state.ErrUnavailable})
	for _, p := range apiResources {
		for _, q := range []string{"", "allowStale=true"} {
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			r := e.get(t, p+sep+q)
			if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || r.apiError(t).Code != apiv1.CodeNotReady {
				t.Fatalf("%s%s%s: %d %s", p, sep, q, r.status, r.body)
			}
		}
	}
	r := e.get(t, apiv1.PathReadyz)
	var h apiv1.Health
	r.decode(t, &h)
	if r.status != 503 || len(h.Reasons) == 0 {
		t.Fatalf("readyz (no tokens: reasons for everyone): %d %s", r.status, r.body)
	}
	if r := e.get(t, apiv1.PathHealthz); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
}

// TestFailClosedOnTimeout: a store that stops answering (rather than
// failing fast) is a 503 within the coordinator's request timeout.
func TestFailClosedOnTimeout(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	e.store.SetFault(state.ErrTimeout)
	defer e.store.ClearFault()
	start := time.Now()
	r := e.get(t, apiv1.PathNodes)
	if r.status != http.StatusServiceUnavailable || r.apiError(t).Code != apiv1.CodeNotReady {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("503 took %s; the view should give up after the 200ms request timeout", d)
	}
}

// TestUnreadyServesNoCurrentData: with the store answering but the
// coordinator unready (here another process took its node ID, so its own
// record is refused), data-bearing resources answer 503, never 200 with
// what may be a partial membership; allowStale=true still answers.
func TestUnreadyServesNoCurrentData(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	e.put(t, workerRecord("w1", nil), time.Hour)
	waitFor(t, "coordinator ready", func() bool { return e.coord.Readiness().Ready })
	if r := e.get(t, apiv1.PathNodes); r.status != http.StatusOK {
		t.Fatalf("nodes while ready: %d %s", r.status, r.body)
	}
	// Another incarnation registers this coordinator's node ID.
	impostor := &cluster.Record{ClusterID: clusterID, NodeID: e.coord.NodeID(), Role: cluster.RoleCoordinator, IncarnationID: "other-process",
		Address: "127.0.0.1:1", Version: "test", StartTimeUnixMs: time.Now().Add(time.Minute).UnixMilli(), Health: cluster.HealthHealthy, Ready: true}
	if _, err := e.store.UpsertNode(context.Background(), impostor, time.Hour); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "coordinator unready", func() bool { return !e.coord.Readiness().Ready })
	for _, p := range apiResources {
		r := e.get(t, p)
		if r.status != http.StatusServiceUnavailable || r.apiError(t).Code != apiv1.CodeNotReady {
			t.Fatalf("%s while unready: %d %s", p, r.status, r.body)
		}
	}
	if r := e.get(t, apiv1.PathNodes+"?allowStale=true"); r.status != http.StatusOK {
		t.Fatalf("nodes?allowStale=true while unready: %d %s", r.status, r.body)
	}
}
