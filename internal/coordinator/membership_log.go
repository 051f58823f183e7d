package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
)

// membershipLog turns the difference between two views into node events
// and log lines: joins, restarts, health and readiness changes, marks,
// removals (an orderly leave when this coordinator served the
// deregistration), and the identities every coordinator derives alike
// for the same change, so that the store's shared event log keeps one
// event however many coordinators observed it.
type membershipLog struct {
	clusterID string
	log       *slog.Logger
	departed  *departures      // deregistrations served here
	mono      func() time.Time // times the departures
	add       func(Event)      // the coordinator's event list (addEvent)
}

// maxMembershipEvents bounds the node events one view logs; the rest are
// summed up in one line (a mass expiry must not flood the log).
const maxMembershipEvents = 20

// diff logs, one structured line each, the nodes that joined,
// changed health, or expired or were removed between prev and v, and adds
// the same changes, readiness changes and restarts included, to the
// event list.
func (l *membershipLog) diff(prev, v *View) {
	records := func(view *View) map[cluster.Key]*cluster.Record {
		m := make(map[cluster.Key]*cluster.Record, len(view.Snapshot.Records))
		for _, r := range view.Snapshot.Records {
			if r != nil {
				m[r.Key()] = r
			}
		}
		return m
	}
	before, after := records(prev), records(v)
	rev := v.Snapshot.Revision.String()
	logged, dropped := 0, 0
	event := func(level slog.Level, msg string, e Event, args ...any) {
		if logged >= maxMembershipEvents {
			dropped++
			return
		}
		logged++
		e.Revision = rev
		l.add(e)
		if msg != "" {
			l.log.Log(context.Background(), level, msg, append([]any{"role", e.Role, "node", e.NodeID}, args...)...)
		}
	}
	for k, r := range after {
		h := r.EffectiveHealth()
		base := Event{NodeEvent: state.NodeEvent{Role: string(k.Role), NodeID: k.NodeID}}
		old, ok := before[k]
		if !ok {
			e := base
			e.Type, e.New, e.Reason = state.EventNodeJoined, string(h), "address "+r.Address
			// The generation tells a join from the next one of the same
			// incarnation (it expired and registered again; issue 47).
			e.ID = l.nodeEventID(e, r.IncarnationID, r.Generation)
			event(slog.LevelInfo, "node joined", e, "health", string(h), "address", r.Address)
			continue
		}
		if old.IncarnationID != r.IncarnationID {
			e := base
			e.Type, e.Reason = state.EventNodeRestarted, "new incarnation "+r.IncarnationID
			e.ID = l.nodeEventID(e, r.IncarnationID, 0)
			event(slog.LevelInfo, "", e)
		}
		if oh := old.EffectiveHealth(); oh != h {
			e := base
			e.Type, e.Old, e.New = state.EventNodeHealth, string(oh), string(h)
			e.ID = l.nodeEventID(e, r.IncarnationID, r.HeartbeatSeq)
			if r.Late {
				e.Reason = "no heartbeat accepted for unhealthy-after (marked late)"
			}
			if h == cluster.HealthHealthy {
				event(slog.LevelInfo, "node recovered", e, "was", string(oh))
			} else {
				event(slog.LevelWarn, "node health changed", e, "was", string(oh), "now", string(h))
			}
		}
		if old.Ready != r.Ready || (!r.Ready && old.NotReadyReason != r.NotReadyReason) {
			e := base
			e.Type, e.Old, e.New, e.Reason = state.EventNodeReadiness, readyWord(old.Ready), readyWord(r.Ready), r.NotReadyReason
			e.ID = l.nodeEventID(e, r.IncarnationID, r.HeartbeatSeq)
			event(slog.LevelInfo, "node readiness changed", e, "was", e.Old, "now", e.New, "reason", r.NotReadyReason)
		}
		for _, e := range markEvents(old, r, base) {
			e.ID = l.markEventID(e, old, r)
			event(slog.LevelWarn, "node "+string(e.Type)[len("node_"):], e, "reason", e.Reason)
		}
	}
	for k, old := range before {
		if _, ok := after[k]; !ok {
			level, msg, e := l.removal(k, old)
			event(level, msg, e)
		}
	}
	if dropped > 0 {
		l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventsDropped, Revision: rev, Reason: fmt.Sprintf("%d more membership changes in one view", dropped)}})
		l.log.Warn("more membership changes not logged one by one", "count", dropped)
	}
}

// removal is the event of a record gone from the view, and how to log
// it: an orderly leave when this coordinator served its deregistration,
// an expiry or removal to look into otherwise.
func (l *membershipLog) removal(k cluster.Key, old *cluster.Record) (slog.Level, string, Event) {
	e := Event{NodeEvent: state.NodeEvent{Type: state.EventNodeRemoved, Role: string(k.Role), NodeID: k.NodeID}}
	e.ID = l.nodeEventID(e, old.IncarnationID, 0)
	if l.departed.take(k, old.IncarnationID, l.mono()) {
		e.Reason = "deregistered"
		return slog.LevelInfo, "node left: deregistered", e
	}
	return slog.LevelWarn, "node expired or removed", e
}

// markEvents returns the events of the operator's and the coordinators'
// marks that changed from old to r: a cordon set or lifted (who, when,
// persisted) and a revocation. Every coordinator reads the same marks
// from the store, so each lists them, whichever coordinator took the
// request.
func markEvents(old, r *cluster.Record, base Event) []Event {
	var out []Event
	if old.Cordoned() != r.Cordoned() || (r.Cordoned() && old.CordonPersist != r.CordonPersist) {
		e := base
		e.Type, e.Old, e.New, e.Reason = state.EventNodeUncordoned, cordonWord(old), cordonWord(r), "uncordoned by an operator"
		if r.Cordoned() {
			e.Type, e.Reason = state.EventNodeCordoned, "cordoned by "+r.CordonedBy
			if r.CordonPersist {
				e.Reason += " (kept across restarts)"
			}
		}
		out = append(out, e)
	}
	if !old.Revoked() && r.Revoked() {
		e := base
		e.Type, e.New, e.Reason = state.EventNodeRevoked, "revoked", fmt.Sprintf("credential on %s's deny list (%s)", r.RevokedBy, r.RevokedReason)
		out = append(out, e)
	}
	return out
}

// nodeEventID is the identity of node event e about incarnation inc at
// heartbeat sequence seq (0 when the incarnation alone identifies it):
// every coordinator that observes the change derives the same.
func (l *membershipLog) nodeEventID(e Event, inc string, seq uint64) string {
	return state.EventID(state.EventIdentity{ClusterID: l.clusterID, Type: e.Type, Role: e.Role, NodeID: e.NodeID,
		Incarnation: inc, Seq: seq, Old: e.Old, New: e.New})
}

// markEventID is the identity of mark event e from old to r: the
// cordon's time tells one cordon (or its lifting) from the next.
func (l *membershipLog) markEventID(e Event, old, r *cluster.Record) string {
	at := r.CordonedAtUnixMs
	if e.Type == state.EventNodeUncordoned {
		at = old.CordonedAtUnixMs
	}
	return l.nodeEventID(e, r.IncarnationID, uint64(max(0, at)))
}

// placementEventID is the identity of a placement_version_changed event
// from prev's version to v's. Keyed by the versions alone, a change back
// and forth (a cordon, its lifting, the same cordon again) was one event
// however often it happened (issue 47: three cordon rounds listed one
// pair). The identity also carries the cause: for every worker that
// entered or left the eligible set, its record's version of the change
// (placementCause), which every coordinator reads alike from the store.
// Without a previous view whose version is old (the first after a start
// or a recovery) it falls back to the versions alone.
func (l *membershipLog) placementEventID(prev, v *View, old, updated placement.Version) string {
	id := state.EventIdentity{ClusterID: l.clusterID, Type: state.EventPlacementVersion, Old: old.String(), New: updated.String()}
	if prev != nil && prev.Version() == old {
		id.Seq = placementCause(prev, v)
	}
	return state.EventID(id)
}

// cordonWord is the event value of a record's cordon.
func cordonWord(r *cluster.Record) string {
	switch {
	case r.Cordoned() && r.CordonPersist:
		return "cordoned_persist"
	case r.Cordoned():
		return "cordoned"
	}
	return "uncordoned"
}

// readyWord is the event value of a readiness.
func readyWord(ready bool) string {
	if ready {
		return "ready"
	}
	return "not_ready"
}
