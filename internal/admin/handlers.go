package admin

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
)

// healthz answers liveness: the process serves HTTP, so it can run its
// loop. It does not consult the store (ADR section 8). Endpoints without
// parameters ignore the query, so that a probe or load balancer that adds
// one still works.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ bool) error {
	writeJSON(w, http.StatusOK, apiv1.Health{Status: apiv1.StatusOK})
	return nil
}

// readyz answers readiness: 200 ready or 503 not_ready, with the reasons
// for callers allowed to see them.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, authed bool) error {
	var ready bool
	var reasons []string
	if c := s.opts.Coordinator; c != nil {
		rd := c.Readiness()
		ready, reasons = rd.Ready, rd.Reasons
	} else {
		rd := s.opts.Worker.Readiness()
		ready, reasons = rd.Ready, rd.Reasons
	}
	body := apiv1.Health{Status: apiv1.StatusReady}
	status := http.StatusOK
	if !ready {
		body.Status, status = apiv1.StatusNotReady, http.StatusServiceUnavailable
		if authed {
			body.Reasons = reasons
		}
	}
	writeJSON(w, status, body)
	return nil
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ bool) error {
	s.metrics.ServeHTTP(w, r)
	return nil
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request, _ bool) error {
	doc := apiv1.OpenAPI()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
	return nil
}

func (s *Server) ui(w http.ResponseWriter, r *http.Request, _ bool) error {
	w.Header().Set("Content-Security-Policy", uiCSP)
	s.opts.UI.ServeHTTP(w, r)
	return nil
}

// meta is the metadata of an answer built from v.
func (s *Server) meta(v *coordinator.View, stale bool) apiv1.Meta {
	return apiv1.Meta{
		SchemaVersion:     apiv1.SchemaVersion,
		GeneratedAtUnixMs: s.now().UnixMilli(),
		Revision:          v.Snapshot.Revision.String(),
		ObservedAtUnixMs:  v.ObservedAt.UnixMilli(),
		Stale:             stale,
	}
}

// view returns a view read after the request arrived, or, when none can
// be had and allowStale is set, the last good one marked stale. The error
// wraps coordinator.ErrNotReady (503).
func (s *Server) view(r *http.Request, allowStale bool) (*coordinator.View, bool, error) {
	c := s.opts.Coordinator
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
func (s *Server) liveRecords(v *coordinator.View) []*cluster.Record {
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
func (s *Server) apiNode(v *coordinator.View, rec *cluster.Record) apiv1.Node {
	n := apiv1.NodeFromRecord(rec, v.Snapshot.ObservedAtUnixMs)
	c := s.opts.Coordinator
	if heard := c.HeardAtUnixMs(rec.Key(), rec.IncarnationID); heard > n.HeartbeatAtUnixMs {
		n.HeartbeatAtUnixMs = heard
		n.HeartbeatAgeMs = max(0, v.Snapshot.ObservedAtUnixMs-heard)
	}
	if rec.Role == cluster.RoleCoordinator {
		now := s.now()
		version, eligible := v.Version().String(), int64(v.Table.Len())
		held := s.totals.placementHeld(version, eligible, now)
		n.Agree = agreement(&n, c.NodeID(), version, eligible, held, 3*c.Timing().HeartbeatInterval, now.UnixMilli())
	}
	return n
}

// cluster answers GET /api/v1/cluster.
func (s *Server) cluster(w http.ResponseWriter, r *http.Request, _ bool) error {
	_, allowStale, err := parseStaleOnly(r.URL.RawQuery)
	if err != nil {
		return err
	}
	v, stale, err := s.view(r, allowStale)
	if err != nil {
		return err
	}
	c := s.opts.Coordinator
	t := c.Timing()
	out := apiv1.Cluster{
		Meta:              s.meta(v, stale),
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
	records := s.liveRecords(v)
	out.Nodes = countNodes(records)
	out.Coordinators = s.totals.presence(records, c.ExpectedCoordinators(), s.now())
	out.Capacity = s.totals.capacity(records)
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
func (s *Server) nodes(w http.ResponseWriter, r *http.Request, _ bool) error {
	p, err := parseListParams(r.URL.RawQuery)
	if err != nil {
		return err
	}
	v, stale, err := s.view(r, p.allowStale)
	if err != nil {
		return err
	}
	all := s.liveRecords(v)
	s.totals.seeCoordinators(all, s.now()) // so a later one that goes missing is named
	start := 0
	if p.after != nil {
		after := &cluster.Record{Role: p.after.role, NodeID: p.after.nodeID}
		// First record strictly after the cursor.
		start, _ = slices.BinarySearchFunc(all, after, compareRecords)
		if start < len(all) && compareRecords(all[start], after) == 0 {
			start++
		}
	}
	out := apiv1.NodeList{Meta: s.meta(v, stale), Items: []apiv1.Node{}}
	for _, rec := range all[start:] {
		if !p.filter.match(rec, rec.EffectiveHealth()) {
			continue
		}
		if len(out.Items) == p.limit {
			last := out.Items[len(out.Items)-1]
			out.Continue = encodeContinue(cursor{role: cluster.Role(last.Role), nodeID: last.NodeID})
			break
		}
		out.Items = append(out.Items, s.apiNode(v, rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// node answers GET /api/v1/nodes/{nodeId}[?role=R].
func (s *Server) node(w http.ResponseWriter, r *http.Request, _ bool) error {
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
	v, stale, err := s.view(r, allowStale)
	if err != nil {
		return err
	}
	var found []apiv1.Node
	for _, rec := range s.liveRecords(v) {
		if rec.NodeID == id && (role == "" || rec.Role == role) {
			found = append(found, s.apiNode(v, rec))
		}
	}
	switch len(found) {
	case 0:
		return notFound("node %q is not in cluster %q (absent, or its lease expired)", id, s.opts.Coordinator.ClusterID())
	case 1:
		writeJSON(w, http.StatusOK, apiv1.NodeResponse{Meta: s.meta(v, stale), Node: found[0]})
		return nil
	}
	return badParam(apiv1.ParamRole, "", "is required: node ID %q names both a coordinator and a worker", id)
}

// placement answers GET /api/v1/placement: what a PlacementLookup for key
// and replicas answers from the same view, plus the ranking and exclusions.
func (s *Server) placement(w http.ResponseWriter, r *http.Request, _ bool) error {
	p, err := parsePlacementParams(r.URL.RawQuery, s.opts.Coordinator.PlacementReplicas())
	if err != nil {
		return err
	}
	v, stale, err := s.view(r, p.allowStale)
	if err != nil {
		return err
	}
	out := apiv1.Placement{
		Meta:             s.meta(v, stale),
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

// status answers a worker's GET /api/v1/status.
func (s *Server) status(w http.ResponseWriter, r *http.Request, _ bool) error {
	wk := s.opts.Worker
	now := s.now().UnixMilli()
	rec, rev := wk.LastAccepted()
	rd := wk.Readiness()
	out := apiv1.Status{
		Meta: apiv1.Meta{
			SchemaVersion:     apiv1.SchemaVersion,
			GeneratedAtUnixMs: now,
			Revision:          rev,
			ObservedAtUnixMs:  now,
		},
		NodeID:        wk.NodeID(),
		Role:          string(cluster.RoleWorker),
		IncarnationID: wk.Incarnation(),
		DataAddress:   wk.DataAddress(),
		Registered:    rec != nil,
		Ready:         rd.Ready,
		Reasons:       append([]string{}, rd.Reasons...),
	}
	out.Cordoned, _ = wk.Cordoned()
	out.InflightRequests = wk.InflightRequests()
	if rec != nil {
		// The worker's own view: its reported health (only readers of the
		// shared store apply lateness; an age of zero is fresh under any
		// timing) and the age of its last acceptance.
		n := apiv1.NodeFromRecord(rec, rec.UpdatedAtUnixMs)
		n.HeartbeatAgeMs = max(0, now-rec.UpdatedAtUnixMs)
		out.Node = &n
	}
	if u := s.opts.WorkerUsage; u != nil {
		capy, counters := u.Status()
		out.Current = &apiv1.Usage{Capacity: apiv1.CapacityFrom(capy), Counters: apiv1.CountersFrom(counters)}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
