package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// putMixedWorkers writes five workers covering every placement outcome.
func putMixedWorkers(t *testing.T, e *env) {
	t.Helper()
	w1 := workerRecord("w1", map[string]string{"zone": "a", "rack": "r1"})
	w1.Capacity = cluster.Capacity{CapacityBytes: 1 << 30, ResidentBytes: 1 << 20, Blocks: 16, Pages: 256, InflightLoads: 2}
	w1.Counters = cluster.Counters{RequestsTotal: 100, HitsTotal: 90, MissesTotal: 10, BytesServedTotal: 4096, EvictionsTotal: 3}
	w2 := workerRecord("w2", map[string]string{"zone": "b"})
	w2.Health = cluster.HealthDegraded
	w3 := workerRecord("w3", map[string]string{"zone": "a"})
	w3.Ready = false
	w4 := workerRecord("w4", nil)
	w4.Health = cluster.HealthUnhealthy
	w5 := workerRecord("w5", nil)
	w5.Health = cluster.HealthUnknown
	for _, r := range []*cluster.Record{w1, w2, w3, w4, w5} {
		e.put(t, r, testTiming.LeaseTTL)
	}
}

func checkMeta(t *testing.T, m apiv1.Meta, stale bool) {
	t.Helper()
	now := time.Now().UnixMilli()
	if m.SchemaVersion != apiv1.SchemaVersion || m.Revision == "" || m.Stale != stale ||
		m.GeneratedAtUnixMs < now-5000 || m.GeneratedAtUnixMs > now+1000 || m.ObservedAtUnixMs > m.GeneratedAtUnixMs || m.ObservedAtUnixMs <= 0 {
		t.Fatalf("meta %+v (now %d, want stale %v)", m, now, stale)
	}
}

func TestClusterEndpoint(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	putMixedWorkers(t, e)
	r := e.get(t, apiv1.PathCluster)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var c apiv1.Cluster
	r.decode(t, &c)
	checkMeta(t, c.Meta, false)
	v, err := e.coord.View(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := apiv1.Cluster{
		Meta: c.Meta, ClusterID: clusterID, ServedBy: "coord-a", PlacementVersion: v.Version().String(),
		EligibleWorkers: 2, PlacementReplicas: 2, // the coordinator's default (issue 38: explain used 1)
		Store: apiv1.StoreStatus{Backend: "memory", Healthy: true},
		Nodes: apiv1.ClusterNodes{
			Total:        6,
			Coordinators: apiv1.Counts{Total: 1, Healthy: 1, Ready: 1},
			Workers:      apiv1.Counts{Total: 5, Healthy: 2, Degraded: 1, Unhealthy: 1, Unknown: 1, Ready: 4},
		},
		Timing:       apiv1.Timing{HeartbeatIntervalMs: 100, UnhealthyAfterMs: 60000, LeaseTTLMs: 120000},
		Coordinators: apiv1.CoordinatorPresence{Expected: 1, Present: 1, Ready: 1, Missing: []apiv1.MissingCoordinator{}, Complete: true},
	}
	// Totals of the five workers (only w1 has capacity and counters): no
	// rates from one status write.
	if got := c.Capacity; got.Workers != 5 || got.CapacityBytes != 1<<30 || got.ResidentBytes != 1<<20 || got.HitRatio == nil || *got.HitRatio != 0.9 ||
		got.RequestsPerSecond != nil || got.RateWorkers != 0 {
		t.Errorf("capacity %+v (hit ratio %v), want 5 workers, 1 GiB, 1 MiB resident, hit ratio 0.9, no rates yet", got, got.HitRatio)
	}
	want.Capacity = c.Capacity
	// The test's workers report version "test", the coordinator its
	// build's ("dev"): two versions at one level is mixed all the same.
	if u := c.Upgrade; u == nil || u.FeatureLevel != cluster.BuildLevel || u.ServerLevel != cluster.BuildLevel || !u.Mixed ||
		fmt.Sprint(u.Versions) != fmt.Sprintf("[{coordinator %s %d 1} {worker test %d 5}]", buildinfo.Version, cluster.BuildLevel, cluster.BuildLevel) {
		t.Errorf("upgrade %+v; want every process at the build's level %d, two versions (mixed)", u, cluster.BuildLevel)
	}
	want.Upgrade = c.Upgrade
	if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", want) {
		t.Fatalf("cluster\n got %+v\nwant %+v", c, want)
	}
	if len(c.PlacementVersion) != 16 || strings.ToLower(c.PlacementVersion) != c.PlacementVersion {
		t.Fatalf("placementVersion %q is not 16 lowercase hex digits", c.PlacementVersion)
	}
	// Field names on the wire, as the issue lists them.
	var raw map[string]json.RawMessage
	r.decode(t, &raw)
	for _, f := range []string{"schemaVersion", "generatedAtUnixMs", "revision", "observedAtUnixMs", "stale", "clusterId", "placementVersion", "store", "nodes"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("cluster JSON has no %q", f)
		}
	}
}

func TestNodesEndpointFields(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	putMixedWorkers(t, e)
	r := e.get(t, apiv1.PathNodes)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var list apiv1.NodeList
	r.decode(t, &list)
	checkMeta(t, list.Meta, false)
	var ids []string
	for _, n := range list.Items {
		ids = append(ids, n.Role+"/"+n.NodeID)
	}
	if want := []string{"coordinator/coord-a", "worker/w1", "worker/w2", "worker/w3", "worker/w4", "worker/w5"}; !slices.Equal(ids, want) || list.Continue != "" {
		t.Fatalf("items %v continue %q, want %v and none", ids, list.Continue, want)
	}
	w1 := list.Items[1]
	if w1.ClusterID != clusterID || w1.IncarnationID != "inc-w1" || w1.Version != "test" || w1.Address != "w1.data.test:7500" ||
		w1.Health != "healthy" || !w1.Ready || w1.Labels["zone"] != "a" || w1.HeartbeatAgeMs != 0 ||
		w1.UpdatedAtUnixMs != e.clock.Now().UnixMilli() || w1.Capacity.CapacityBytes != 1<<30 || w1.Capacity.ResidentBytes != 1<<20 ||
		w1.Capacity.Blocks != 16 || w1.Capacity.Pages != 256 || w1.Capacity.InflightLoads != 2 ||
		w1.Counters.RequestsTotal != 100 || w1.Counters.HitsTotal != 90 || w1.Counters.BytesServedTotal != 4096 {
		t.Fatalf("w1 = %+v", w1)
	}
	coord := list.Items[0]
	if coord.Role != "coordinator" || coord.Address != e.ctrl || !coord.Capacity.StoreHealthy || coord.StartTimeUnixMs == 0 {
		t.Fatalf("coordinator = %+v", coord)
	}
	// Every field the issue lists is on the wire for every node.
	var raw struct {
		Items []map[string]json.RawMessage `json:"items"`
	}
	r.decode(t, &raw)
	for _, item := range raw.Items {
		for _, f := range []string{"nodeId", "role", "clusterId", "incarnationId", "version", "address", "adminAddress",
			"startTimeUnixMs", "heartbeatSeq", "updatedAtUnixMs", "heartbeatAgeMs", "health", "ready", "labels", "capacity", "counters"} {
			if _, ok := item[f]; !ok {
				t.Errorf("node %s has no %q", item["nodeId"], f)
			}
		}
	}

	// Lateness: once a coordinator has proposed a worker late (here the
	// test, 400ms after its last update) it is unhealthy whatever it
	// reported, with its age.
	e.clock.Advance(400 * time.Millisecond)
	e.transition(t, "w2", state.TransitionLate)
	var n apiv1.NodeResponse
	r = e.get(t, apiv1.PathNodes+"/w2")
	r.decode(t, &n)
	if n.Node.Health != "unhealthy" || n.Node.ReportedHealth != "degraded" || n.Node.HeartbeatAgeMs != 400 || n.Node.Labels["zone"] != "b" {
		t.Fatalf("late w2 = %+v", n.Node)
	}
	checkMeta(t, n.Meta, false)
}

func TestNodeEndpointNotFoundAndAmbiguous(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	e.put(t, workerRecord("w1", nil), testTiming.LeaseTTL)
	// A record whose lease is long but that a coordinator proposed expired
	// (below) is gone from the store and so from the API.
	e.put(t, workerRecord("w-old", nil), time.Hour)
	// A worker sharing the coordinator's node ID.
	e.put(t, workerRecord("coord-a", nil), time.Hour)

	if r := e.get(t, apiv1.PathNodes+"/w1"); r.status != http.StatusOK {
		t.Fatalf("w1: %d %s", r.status, r.body)
	}
	tests := []struct {
		path   string
		status int
		code   string
		param  string
	}{
		{apiv1.PathNodes + "/absent", 404, apiv1.CodeNotFound, ""},
		{apiv1.PathNodes + "/coord-a", 400, apiv1.CodeInvalidArgument, "role"},
		{apiv1.PathNodes + "/coord-a?role=bogus", 400, apiv1.CodeInvalidArgument, "role"},
		{apiv1.PathNodes + "/bad%20id", 400, apiv1.CodeInvalidArgument, "nodeId"},
		{apiv1.PathNodes + "/", 400, apiv1.CodeInvalidArgument, "nodeId"},
		{apiv1.PathStatus, 404, apiv1.CodeNotFound, ""}, // a worker endpoint
		{"/api/v1/unknown", 404, apiv1.CodeNotFound, ""},
		{"/api", 404, apiv1.CodeNotFound, ""},
		{"/", 404, apiv1.CodeNotFound, ""}, // no UI handler configured
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := e.get(t, tt.path)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			er := r.apiError(t)
			if er.Code != tt.code || er.Parameter != tt.param || er.Message == "" || er.Retryable {
				t.Fatalf("error %+v", er)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("content type %q", ct)
			}
		})
	}
	for _, role := range []string{"coordinator", "worker"} {
		var n apiv1.NodeResponse
		r := e.get(t, apiv1.PathNodes+"/coord-a?role="+role)
		r.decode(t, &n)
		if r.status != 200 || n.Node.Role != role {
			t.Fatalf("role=%s: %d %s", role, r.status, r.body)
		}
	}

	e.transition(t, "w1", state.TransitionExpire)
	e.transition(t, "w-old", state.TransitionExpire)
	r := e.get(t, apiv1.PathNodes+"/w-old")
	if r.status != http.StatusNotFound || r.apiError(t).Message != `node "w-old" is not in cluster "test" (absent, or its lease expired)` {
		t.Fatalf("expired node: %d %s", r.status, r.body)
	}
	var list apiv1.NodeList
	e.get(t, apiv1.PathNodes+"?role=worker").decode(t, &list)
	for _, n := range list.Items {
		if n.NodeID == "w-old" || n.NodeID == "w1" {
			t.Fatalf("expired node %s listed", n.NodeID)
		}
	}
}

func listIDs(items []apiv1.Node) []string {
	var ids []string
	for _, n := range items {
		ids = append(ids, n.Role+"/"+n.NodeID)
	}
	return ids
}

// TestNodesPagination lists more nodes than one page: pages are in (role,
// node ID) order without gaps or repeats, and the keyset token stays valid
// when the membership changes between pages.
func TestNodesPagination(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	const workers = 250
	for i := range workers {
		e.put(t, workerRecord(fmt.Sprintf("w%03d", i+10), map[string]string{"zone": []string{"a", "b"}[i%2]}), time.Hour)
	}

	var all []string
	cont := ""
	pages := 0
	for {
		path := apiv1.PathNodes + "?limit=100"
		if cont != "" {
			path += "&continue=" + url.QueryEscape(cont)
		}
		r := e.get(t, path)
		if r.status != 200 {
			t.Fatalf("page %d: %d %s", pages, r.status, r.body)
		}
		var list apiv1.NodeList
		r.decode(t, &list)
		pages++
		if len(list.Items) > 100 {
			t.Fatalf("page of %d items exceeds the limit", len(list.Items))
		}
		all = append(all, listIDs(list.Items)...)
		if pages == 1 {
			// Membership changes between pages: a node before the cursor is
			// not seen (no shift, no repeat), one after it is.
			e.put(t, workerRecord("w000", nil), time.Hour)
			e.put(t, workerRecord("w999", nil), time.Hour)
		}
		if list.Continue == "" {
			break
		}
		cont = list.Continue
	}
	if pages != 3 {
		t.Fatalf("%d pages, want 3", pages)
	}
	want := []string{"coordinator/coord-a"}
	for i := range workers {
		want = append(want, fmt.Sprintf("worker/w%03d", i+10))
	}
	want = append(want, "worker/w999")
	if !slices.Equal(all, want) {
		t.Fatalf("paged listing has %d entries, want %d in order; first %v", len(all), len(want), all[:5])
	}

	t.Run("default limit", func(t *testing.T) {
		var list apiv1.NodeList
		e.get(t, apiv1.PathNodes).decode(t, &list)
		if len(list.Items) != apiv1.DefaultLimit || list.Continue == "" {
			t.Fatalf("default page: %d items, continue %q", len(list.Items), list.Continue)
		}
	})
	t.Run("max limit", func(t *testing.T) {
		var list apiv1.NodeList
		e.get(t, apiv1.PathNodes+"?limit=1000").decode(t, &list)
		if len(list.Items) != workers+3 || list.Continue != "" {
			t.Fatalf("limit 1000: %d items, continue %q", len(list.Items), list.Continue)
		}
	})
	t.Run("filtered pages", func(t *testing.T) {
		var got []string
		cont := ""
		for {
			var list apiv1.NodeList
			path := apiv1.PathNodes + "?label=zone%3Db&limit=7"
			if cont != "" {
				path += "&continue=" + url.QueryEscape(cont)
			}
			e.get(t, path).decode(t, &list)
			got = append(got, listIDs(list.Items)...)
			if list.Continue == "" {
				break
			}
			cont = list.Continue
		}
		if len(got) != workers/2 || !slices.IsSorted(got) {
			t.Fatalf("zone=b pages: %d nodes (sorted %v), want %d", len(got), slices.IsSorted(got), workers/2)
		}
	})
	t.Run("client AllNodes", func(t *testing.T) {
		c, err := apiv1.NewClient([]string{e.url}, apiv1.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, err := c.AllNodes(context.Background(), apiv1.NodeFilter{Role: "worker"})
		if err != nil {
			t.Fatal(err)
		}
		want := append([]string{"worker/w000"}, all[1:]...) // w000 came after the first page
		if !slices.Equal(listIDs(list.Items), want) {
			t.Fatalf("AllNodes: %d workers, want %d", len(list.Items), len(want))
		}
	})
}

func TestNodesFilters(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	putMixedWorkers(t, e)
	tests := []struct {
		query string
		want  []string
	}{
		{"role=coordinator", []string{"coordinator/coord-a"}},
		{"role=worker", []string{"worker/w1", "worker/w2", "worker/w3", "worker/w4", "worker/w5"}},
		{"health=degraded", []string{"worker/w2"}},
		{"health=unknown", []string{"worker/w5"}},
		{"health=healthy&role=worker", []string{"worker/w1", "worker/w3"}},
		{"ready=false", []string{"worker/w3"}},
		{"ready=true&role=worker", []string{"worker/w1", "worker/w2", "worker/w4", "worker/w5"}},
		{"label=zone%3Da", []string{"worker/w1", "worker/w3"}},
		{"label=zone%3Da&label=rack%3Dr1", []string{"worker/w1"}},
		{"label=zone%3Dc", nil},
		{"label=zone%3D", nil},
		{"health=unhealthy&label=zone%3Da", nil},
		// labelSelector: the Kubernetes syntax, parsed by the library.
		{"labelSelector=zone%3Da", []string{"worker/w1", "worker/w3"}},
		{"labelSelector=zone%3D%3Da", []string{"worker/w1", "worker/w3"}},
		{"labelSelector=zone!%3Da&role=worker", []string{"worker/w2", "worker/w4", "worker/w5"}},
		{"labelSelector=" + url.QueryEscape("zone in (b,c)"), []string{"worker/w2"}},
		{"labelSelector=" + url.QueryEscape("zone notin (a)"), []string{"coordinator/coord-a", "worker/w2", "worker/w4", "worker/w5"}},
		{"labelSelector=rack", []string{"worker/w1"}},
		{"labelSelector=!zone&role=worker", []string{"worker/w4", "worker/w5"}},
		{"labelSelector=" + url.QueryEscape("zone=a,!rack"), []string{"worker/w3"}},
		{"labelSelector=zone&label=rack%3Dr1", []string{"worker/w1"}},
		{"labelSelector=", []string{"coordinator/coord-a", "worker/w1", "worker/w2", "worker/w3", "worker/w4", "worker/w5"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := e.get(t, apiv1.PathNodes+"?"+tt.query)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var list apiv1.NodeList
			r.decode(t, &list)
			if got := listIDs(list.Items); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if list.Items == nil || !strings.Contains(string(r.body), `"items":[`) {
				t.Fatalf("items is not a list: %s", r.body)
			}
		})
	}
}

// TestPlacementEndpoint checks the explanation and that it answers what a
// PlacementLookup over the control protocol answers.
func TestPlacementEndpoint(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	putMixedWorkers(t, e)
	for _, id := range []string{"w6", "w7", "w8"} {
		e.put(t, workerRecord(id, nil), time.Hour)
	}
	pc, err := client.New(client.Options{Coordinators: []string{e.ctrl}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, tc := range []struct {
		key      string
		replicas int
	}{{"bucket/object-1#0", 1}, {"bucket/object-1#1", 3}, {"k", 5}, {"ü/ñ space", 16}} {
		t.Run(fmt.Sprintf("%s/%d", tc.key, tc.replicas), func(t *testing.T) {
			r := e.get(t, apiv1.PathPlacement+"?key="+url.QueryEscape(tc.key)+"&replicas="+fmt.Sprint(tc.replicas))
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var p apiv1.Placement
			r.decode(t, &p)
			checkMeta(t, p.Meta, false)
			eligible := 5 // w1, w2 (degraded), w6, w7, w8
			if p.Key != tc.key || p.Replicas != tc.replicas || p.Outcome != apiv1.OutcomeOK ||
				len(p.Candidates) != eligible || len(p.Owners) != min(tc.replicas, eligible) {
				t.Fatalf("placement %+v", p)
			}
			for i, o := range p.Owners {
				c := p.Candidates[i]
				if o.NodeID != c.NodeID || o.Address != c.Address {
					t.Fatalf("owner %d %+v is not candidate %d %+v", i, o, i, c)
				}
			}
			for i, c := range p.Candidates {
				if c.Rank != i+1 || len(c.Score) != 16 {
					t.Fatalf("candidate %d: %+v", i, c)
				}
				if i > 0 && c.Score > p.Candidates[i-1].Score {
					t.Fatalf("candidates not by descending score: %+v", p.Candidates)
				}
			}
			wantExcluded := []apiv1.Exclusion{ex("w3", "not_ready", "healthy"), ex("w4", "unhealthy", "unhealthy"), ex("w5", "unhealthy", "unknown")}
			if !slices.Equal(p.Excluded, wantExcluded) {
				t.Fatalf("excluded %+v, want %+v", p.Excluded, wantExcluded)
			}
			// The control protocol's answer from the same membership.
			lk, err := pc.Lookup(context.Background(), tc.key, tc.replicas)
			if err != nil {
				t.Fatal(err)
			}
			if apiv1.FormatU64(uint64(lk.Version)) != p.PlacementVersion {
				t.Fatalf("protocol version %016x, api %s", lk.Version, p.PlacementVersion)
			}
			if owners := apiOwners(lk.Owners); !slices.Equal(owners, p.Owners) {
				t.Fatalf("protocol owners %+v, api %+v", owners, p.Owners)
			}
		})
	}

	t.Run("no eligible worker: expired and late", func(t *testing.T) {
		// Proposed expired, w1 to w5 leave the store (whatever their
		// lease); proposed late, the 1h-lease w6 to w8 stay listed but
		// are unhealthy for placement.
		for _, id := range []string{"w1", "w2", "w3", "w4", "w5"} {
			e.transition(t, id, state.TransitionExpire)
		}
		for _, id := range []string{"w6", "w7", "w8"} {
			e.transition(t, id, state.TransitionLate)
		}
		var p apiv1.Placement
		r := e.get(t, apiv1.PathPlacement+"?key=k&replicas=2")
		r.decode(t, &p)
		if r.status != 200 || p.Outcome != apiv1.OutcomeNoWorkers || len(p.Owners) != 0 || len(p.Candidates) != 0 || p.PlacementVersion != "0000000000000000" {
			t.Fatalf("%d %+v", r.status, p)
		}
		want := []apiv1.Exclusion{ex("w6", "unhealthy", "unhealthy"), ex("w7", "unhealthy", "unhealthy"), ex("w8", "unhealthy", "unhealthy")}
		if !slices.Equal(p.Excluded, want) {
			t.Fatalf("excluded %+v, want %+v", p.Excluded, want)
		}
		if !strings.Contains(string(r.body), `"owners":[]`) {
			t.Fatalf("owners is not an empty list: %s", r.body)
		}
	})
}

func ex(id, reason, health string) apiv1.Exclusion {
	return apiv1.Exclusion{NodeID: id, Reason: reason, Health: health}
}

// TestPlacementDefaultReplicas: a placement request without replicas gets
// the cluster's placement-replicas, the owners its clients read (issue 38:
// talonctl placement explain showed 1 while the cluster placed 2).
func TestPlacementDefaultReplicas(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	putMixedWorkers(t, e)
	r := e.get(t, apiv1.PathPlacement+"?key=k")
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var p apiv1.Placement
	r.decode(t, &p)
	var c apiv1.Cluster
	e.get(t, apiv1.PathCluster).decode(t, &c)
	if p.Replicas != 2 || c.PlacementReplicas != 2 || len(p.Owners) != 2 {
		t.Fatalf("replicas %d (cluster's %d), %d owners: want the cluster's 2", p.Replicas, c.PlacementReplicas, len(p.Owners))
	}
}
