package admin

import (
	"net/http"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
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
