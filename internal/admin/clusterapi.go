package admin

// This file is the coordinator's /api/v1 reads of the cluster: the
// cluster summary, its nodes and the placement, all from a view of the
// store (cordon.go, events.go and jobs.go are the other routes of the
// same type).

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
)

// clusterAPI serves a coordinator's /api/v1 routes about the cluster: the
// summary, nodes, placement, events, the operator actions and the cache
// jobs. It has no lock of its own: the coordinator, the totals and the
// watch slots guard their own state. On a worker it is never called (the
// routes are the coordinator's).
type clusterAPI struct {
	coord      Coordinator
	board      Jobs // the cache jobs; nil: the jobs routes answer 404
	now        func() time.Time
	totals     *totals     // cluster totals and coordinator presence across requests
	watches    *watchSlots // open event watches
	watchGauge prometheus.Gauge
	ident      clientIdentity // who a request is from (its watch slots)
}

// onCluster adapts a clusterAPI handler to a route's serve.
func onCluster(h func(*clusterAPI, http.ResponseWriter, *http.Request, bool) error) func(*Server, http.ResponseWriter, *http.Request, bool) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request, authed bool) error {
		return h(s.api, w, r, authed)
	}
}

// meta is the metadata of an answer built from v.
func (a *clusterAPI) meta(v *coordinator.View, stale bool) apiv1.Meta {
	return apiv1.Meta{
		SchemaVersion:     apiv1.SchemaVersion,
		GeneratedAtUnixMs: a.now().UnixMilli(),
		Revision:          v.Snapshot.Revision.String(),
		ObservedAtUnixMs:  v.ObservedAt.UnixMilli(),
		Stale:             stale,
	}
}

// view returns a view read after the request arrived, or, when none can
// be had and allowStale is set, the last good one marked stale. The error
// wraps coordinator.ErrNotReady (503).
func (a *clusterAPI) view(r *http.Request, allowStale bool) (*coordinator.View, bool, error) {
	c := a.coord
	v, err := c.View(r.Context())
	if err == nil {
		// A view read while the coordinator is unready (its own record not
		// accepted yet, draining, or re-registering after a store outage
		// that outlived the leases) may be missing workers that are about
		// to re-register: it is not served as current data.
		if rd := c.Readiness(); !rd.Ready {
			err = fmt.Errorf("%w: coordinator is not ready: %s", coordinator.ErrNotReady, strings.Join(rd.Reasons, "; "))
		} else {
			return v, false, nil
		}
	}
	if allowStale {
		if lg := c.LastGood(); lg != nil {
			return lg, true, nil
		}
	}
	return nil, false, err
}

// liveRecords returns v's records, the ones the store holds at the view's
// revision, ordered by role then node ID. No clock filters them: every
// coordinator that read the same revision lists the same records. The
// records are shared with the view and must not be modified.
func (a *clusterAPI) liveRecords(v *coordinator.View) []*cluster.Record {
	out := make([]*cluster.Record, 0, len(v.Snapshot.Records))
	for _, rec := range v.Snapshot.Records {
		if rec != nil {
			out = append(out, rec)
		}
	}
	// Stores return this order already (state.Snapshot); sorting only when
	// one does not keeps the API's order a property of this package.
	if !slices.IsSortedFunc(out, compareRecords) {
		slices.SortFunc(out, compareRecords)
	}
	return out
}

func compareRecords(a, b *cluster.Record) int {
	return cmp.Or(strings.Compare(string(a.Role), string(b.Role)), strings.Compare(a.NodeID, b.NodeID))
}

// apiNode converts a live record of v, its heartbeat time raised to the
// latest heartbeat this coordinator knows of that the record does not
// show (a renewal).
func (a *clusterAPI) apiNode(v *coordinator.View, rec *cluster.Record) apiv1.Node {
	n := apiv1.NodeFromRecord(rec, v.Snapshot.ObservedAtUnixMs)
	c := a.coord
	if heard := c.HeardAtUnixMs(rec.Key(), rec.IncarnationID); heard > n.HeartbeatAtUnixMs {
		n.HeartbeatAtUnixMs = heard
		n.HeartbeatAgeMs = max(0, v.Snapshot.ObservedAtUnixMs-heard)
	}
	if rec.Role == cluster.RoleCoordinator {
		now := a.now()
		version, eligible := v.Version().String(), int64(v.Table.Len())
		held := a.totals.placementHeld(version, eligible, now)
		n.Agree = agreement(&n, c.NodeID(), version, eligible, held, 3*c.Timing().HeartbeatInterval, now.UnixMilli())
	}
	return n
}

// cluster answers GET /api/v1/cluster.
func (a *clusterAPI) cluster(w http.ResponseWriter, r *http.Request, _ bool) error {
	_, allowStale, err := parseStaleOnly(r.URL.RawQuery)
	if err != nil {
		return err
	}
	v, stale, err := a.view(r, allowStale)
	if err != nil {
		return err
	}
	c := a.coord
	t := c.Timing()
	out := apiv1.Cluster{
		Meta:              a.meta(v, stale),
		ClusterID:         c.ClusterID(),
		ServedBy:          c.NodeID(),
		PlacementVersion:  apiv1.FormatU64(uint64(v.Version())),
		EligibleWorkers:   v.Table.Len(),
		PlacementReplicas: c.PlacementReplicas(),
		Store:             apiv1.StoreStatus{Backend: c.Backend(), Healthy: !stale},
		Timing: apiv1.Timing{
			HeartbeatIntervalMs: t.HeartbeatInterval.Milliseconds(),
			UnhealthyAfterMs:    t.UnhealthyAfter.Milliseconds(),
			LeaseTTLMs:          t.LeaseTTL.Milliseconds(),
			StatusIntervalMs:    t.StatusInterval.Milliseconds(),
		},
	}
	if stale {
		if err := c.LastError(); err != nil {
			out.Store.ErrorCode = state.Code(err)
		}
	}
	out.Store.Alarms, out.Store.Capacity = storeCapacity(c)
	records := a.liveRecords(v)
	out.Nodes = countNodes(records)
	out.Coordinators = a.totals.presence(records, c.ExpectedCoordinators(), a.now())
	out.Capacity = a.totals.capacity(records)
	out.Upgrade = apiv1.UpgradeFromSurvey(v.Survey, cluster.BuildLevel)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// countNodes counts records by role, effective health and readiness.
func countNodes(records []*cluster.Record) apiv1.ClusterNodes {
	var out apiv1.ClusterNodes
	for _, rec := range records {
		counts := &out.Workers
		if rec.Role == cluster.RoleCoordinator {
			counts = &out.Coordinators
		}
		out.Total++
		counts.Total++
		switch rec.EffectiveHealth() {
		case cluster.HealthHealthy:
			counts.Healthy++
		case cluster.HealthDegraded:
			counts.Degraded++
		case cluster.HealthUnhealthy:
			counts.Unhealthy++
		default:
			counts.Unknown++
		}
		if rec.Ready {
			counts.Ready++
		}
	}
	return out
}

// nodes answers GET /api/v1/nodes: filter, keyset pagination.
func (a *clusterAPI) nodes(w http.ResponseWriter, r *http.Request, _ bool) error {
	p, err := parseListParams(r.URL.RawQuery)
	if err != nil {
		return err
	}
	v, stale, err := a.view(r, p.allowStale)
	if err != nil {
		return err
	}
	all := a.liveRecords(v)
	a.totals.seeCoordinators(all, a.now()) // so a later one that goes missing is named
	start := 0
	if p.after != nil {
		after := &cluster.Record{Role: p.after.role, NodeID: p.after.nodeID}
		// First record strictly after the cursor.
		start, _ = slices.BinarySearchFunc(all, after, compareRecords)
		if start < len(all) && compareRecords(all[start], after) == 0 {
			start++
		}
	}
	out := apiv1.NodeList{Meta: a.meta(v, stale), Items: []apiv1.Node{}}
	for _, rec := range all[start:] {
		if !p.filter.match(rec, rec.EffectiveHealth()) {
			continue
		}
		if len(out.Items) == p.limit {
			last := out.Items[len(out.Items)-1]
			out.Continue = encodeContinue(cursor{role: cluster.Role(last.Role), nodeID: last.NodeID})
			break
		}
		out.Items = append(out.Items, a.apiNode(v, rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// node answers GET /api/v1/nodes/{nodeId}[?role=R].
func (a *clusterAPI) node(w http.ResponseWriter, r *http.Request, _ bool) error {
	id := strings.TrimPrefix(r.URL.Path, apiv1.PathNodes+"/")
	if err := cluster.ValidateID("nodeId", id); err != nil {
		return badParam("nodeId", id, "must be a node ID: 1 to %d bytes of [A-Za-z0-9._-], starting with a letter or digit", cluster.MaxIDBytes)
	}
	q, allowStale, err := parseStaleOnly(r.URL.RawQuery, apiv1.ParamRole)
	if err != nil {
		return err
	}
	var role cluster.Role
	if s, ok := q.get(apiv1.ParamRole); ok {
		if role, err = cluster.ParseRole(s); err != nil {
			return badParam(apiv1.ParamRole, s, "must be coordinator or worker")
		}
	}
	v, stale, err := a.view(r, allowStale)
	if err != nil {
		return err
	}
	var found []apiv1.Node
	for _, rec := range a.liveRecords(v) {
		if rec.NodeID == id && (role == "" || rec.Role == role) {
			found = append(found, a.apiNode(v, rec))
		}
	}
	switch len(found) {
	case 0:
		return notFound("node %q is not in cluster %q (absent, or its lease expired)", id, a.coord.ClusterID())
	case 1:
		writeJSON(w, http.StatusOK, apiv1.NodeResponse{Meta: a.meta(v, stale), Node: found[0]})
		return nil
	}
	return badParam(apiv1.ParamRole, "", "is required: node ID %q names both a coordinator and a worker", id)
}

// placement answers GET /api/v1/placement: what a PlacementLookup for key
// and replicas answers from the same view, plus the ranking and exclusions.
func (a *clusterAPI) placement(w http.ResponseWriter, r *http.Request, _ bool) error {
	p, err := parsePlacementParams(r.URL.RawQuery, a.coord.PlacementReplicas())
	if err != nil {
		return err
	}
	v, stale, err := a.view(r, p.allowStale)
	if err != nil {
		return err
	}
	out := apiv1.Placement{
		Meta:             a.meta(v, stale),
		Key:              p.key,
		Replicas:         p.replicas,
		PlacementVersion: apiv1.FormatU64(uint64(v.Version())),
		Outcome:          apiv1.OutcomeOK,
		Owners:           apiOwners(v.Table.Lookup(p.key, p.replicas)),
		Candidates:       []apiv1.Candidate{},
		Excluded:         []apiv1.Exclusion{},
	}
	if len(out.Owners) == 0 {
		out.Outcome = apiv1.OutcomeNoWorkers
	}
	for _, c := range v.Table.Explain(p.key) {
		out.Candidates = append(out.Candidates, apiv1.Candidate{NodeID: c.NodeID, Address: c.Address, Score: apiv1.FormatU64(c.Score), Rank: c.Rank})
	}
	for _, e := range v.Excluded {
		out.Excluded = append(out.Excluded, apiv1.Exclusion{NodeID: e.NodeID, Reason: string(e.Reason), Health: string(e.Health)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// apiOwners converts placement owners to their wire form, never nil: the
// one place where placement.Owner becomes apiv1.Owner (apiv1 stays free of
// placement so that talonctl does not link it).
func apiOwners(owners []placement.Owner) []apiv1.Owner {
	out := make([]apiv1.Owner, len(owners))
	for i, o := range owners {
		out[i] = apiv1.Owner{NodeID: o.NodeID, Address: o.Address}
	}
	return out
}
