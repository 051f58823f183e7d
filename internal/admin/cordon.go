package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
)

// nodeAction answers a coordinator's POST /api/v1/nodes/{nodeId}/cordon
// (persist=true to keep it across the worker's restarts) and /uncordon:
// the coordinator marks the worker's record in the shared store and
// nothing is sent to the worker (ADR 0001 section 9, amended). serveHTTP
// logs the audit line, with the node and details added here.
func (a *clusterAPI) nodeAction(w http.ResponseWriter, r *http.Request, _ bool) error {
	id, on := actionTarget(r.URL.Path)
	aud := auditOf(r.Context())
	if err := cluster.ValidateID("nodeId", id); err != nil {
		return badParam("nodeId", id, "must be a node ID: 1 to %d bytes of [A-Za-z0-9._-], starting with a letter or digit", cluster.MaxIDBytes)
	}
	params := []string{}
	if on {
		params = append(params, apiv1.ParamPersist)
	}
	q, err := parseQuery(r.URL.RawQuery, params, nil)
	if err != nil {
		return err
	}
	persist, err := q.boolean(apiv1.ParamPersist, false)
	if err != nil {
		return err
	}
	aud.attrs = append(aud.attrs, "persist", persist)
	res, err := a.coord.SetCordon(r.Context(), coordinator.CordonRequest{NodeID: id, On: on, Persist: persist, By: aud.principal})
	switch {
	case errors.Is(err, coordinator.ErrNodeNotFound):
		return notFound("%v", err)
	case errors.Is(err, coordinator.ErrNotWorker):
		return badParam("nodeId", id, "names a coordinator: only workers are cordoned (a coordinator leaves service when it is stopped)")
	case err != nil:
		aud.attrs = append(aud.attrs, "error", err)
		return fmt.Errorf("%s %s: %w", aud.action, id, err)
	}
	aud.attrs = append(aud.attrs, "changed", res.Changed)
	rec := res.Record
	out := apiv1.Cordon{NodeID: id, Cordoned: rec.Cordoned(), Persisted: rec.CordonPersist, Changed: res.Changed}
	if rec.Cordoned() {
		out.Cordon = &apiv1.NodeCordon{By: rec.CordonedBy, AtUnixMs: rec.CordonedAtUnixMs, Persist: rec.CordonPersist}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// actionTarget returns the node ID of an operator action's path
// (/api/v1/nodes/{id}/cordon or /uncordon) and whether it cordons.
func actionTarget(path string) (id string, on bool) {
	rest := strings.TrimPrefix(path, apiv1.PathNodes+"/")
	on = strings.HasSuffix(rest, apiv1.SuffixCordon)
	return strings.TrimSuffix(strings.TrimSuffix(rest, apiv1.SuffixCordon), apiv1.SuffixUncordon), on
}
