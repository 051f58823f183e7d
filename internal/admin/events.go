package admin

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/state"
)

// eventParams is the parsed query of GET /api/v1/events.
type eventParams struct {
	q       coordinator.EventQuery
	watch   bool
	timeout time.Duration
}

func parseEventParams(raw string) (eventParams, error) {
	q, err := parseQuery(raw, []string{apiv1.ParamNode, apiv1.ParamAfter, apiv1.ParamSince, apiv1.ParamLimit,
		apiv1.ParamWatch, apiv1.ParamTimeout, apiv1.ParamContinue}, []string{apiv1.ParamType})
	if err != nil {
		return eventParams{}, err
	}
	var p eventParams
	if id, ok := q.get(apiv1.ParamNode); ok {
		if err := cluster.ValidateID(apiv1.ParamNode, id); err != nil {
			return p, badParam(apiv1.ParamNode, id, "must be a node ID: 1 to %d bytes of [A-Za-z0-9._-], starting with a letter or digit", cluster.MaxIDBytes)
		}
		p.q.NodeID = id
	}
	types := q.v[apiv1.ParamType]
	if len(types) > apiv1.MaxEventTypes {
		return p, badParam(apiv1.ParamType, fmt.Sprint(len(types), " values"), "must be given at most %d times", apiv1.MaxEventTypes)
	}
	for _, t := range types {
		known := false
		for _, k := range state.NodeEventTypes() {
			known = known || string(k) == t
		}
		if !known {
			return p, badParam(apiv1.ParamType, t, "must be one of %v", state.NodeEventTypes())
		}
		p.q.Types = append(p.q.Types, state.NodeEventType(t))
	}
	for _, name := range []string{apiv1.ParamAfter, apiv1.ParamContinue} {
		if s, ok := q.get(name); ok && s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil || n > apiv1.MaxEventSeq {
				return p, badParam(name, s, "must be an event sequence number (an integer from 0 to %d)", uint64(apiv1.MaxEventSeq))
			}
			p.q.AfterSeq = max(p.q.AfterSeq, n)
		}
	}
	if s, ok := q.get(apiv1.ParamSince); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return p, badParam(apiv1.ParamSince, s, "must be a time in milliseconds since the Unix epoch")
		}
		p.q.Since = time.UnixMilli(n)
	}
	if p.q.Limit, err = q.intRange(apiv1.ParamLimit, apiv1.DefaultEventLimit, 1, apiv1.MaxEventLimit); err != nil {
		return p, err
	}
	if p.watch, err = q.boolean(apiv1.ParamWatch, false); err != nil {
		return p, err
	}
	secs, err := q.intRange(apiv1.ParamTimeout, apiv1.DefaultWatchSeconds, 1, apiv1.MaxWatchSeconds)
	if err != nil {
		return p, err
	}
	p.timeout = time.Duration(secs) * time.Second
	return p, nil
}

// events answers GET /api/v1/events: the coordinator's own observations
// and the cluster's node events it read from the store's shared event log
// (each once, whichever coordinator wrote it), from memory (they need no
// store read, so they are served while the coordinator fails closed: that
// is when an operator reads them). With
// watch=true and no matching event after `after`, it waits for one up to
// timeoutSeconds, then answers an empty page (a long poll).
func (a *clusterAPI) events(w http.ResponseWriter, r *http.Request, _ bool) error {
	p, err := parseEventParams(r.URL.RawQuery)
	if err != nil {
		return err
	}
	c := a.coord
	page, changed := c.Events(p.q)
	if p.watch && len(page.Events) == 0 {
		client, _ := a.ident.client(r)
		release, err := a.watches.acquire(client, principalOf(r.Context()))
		if err != nil {
			return err
		}
		defer release()
		a.watchGauge.Inc()
		defer a.watchGauge.Dec()
		timer := time.NewTimer(p.timeout)
		defer timer.Stop()
		for len(page.Events) == 0 {
			select {
			case <-changed:
			case <-timer.C:
				return a.writeEvents(w, p, page)
			case <-r.Context().Done():
				return nil
			}
			page, changed = c.Events(p.q)
		}
	}
	return a.writeEvents(w, p, page)
}

func (a *clusterAPI) writeEvents(w http.ResponseWriter, p eventParams, page coordinator.EventPage) error {
	c := a.coord
	now := a.now().UnixMilli()
	out := apiv1.EventList{
		Meta:        apiv1.Meta{SchemaVersion: apiv1.SchemaVersion, GeneratedAtUnixMs: now, ObservedAtUnixMs: now},
		Coordinator: c.NodeID(),
		Incarnation: c.Incarnation(),
		Items:       make([]apiv1.Event, 0, len(page.Events)),
		LastSeq:     page.LastSeq,
		OldestSeq:   page.OldestSeq,
	}
	if lg := c.LastGood(); lg != nil {
		out.Revision = lg.Snapshot.Revision.String()
	}
	for _, e := range page.Events {
		item := apiEvent(e)
		item.Coordinator = cmp.Or(item.Coordinator, c.NodeID())
		out.Items = append(out.Items, item)
	}
	if page.More && len(page.Events) > 0 {
		out.Continue = strconv.FormatUint(page.Events[len(page.Events)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
