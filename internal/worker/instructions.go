package worker

import (
	"context"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
)

// askInstructions asks the coordinators, after an accepted heartbeat, for
// the operator's standing instructions on this worker's record (package
// protocol, Instructions) and converges on them. Operators cordon and
// uncordon through the coordinators' /api/v1 only; the store's cordon
// takes the worker out of placement at once, and this brings the worker's
// own report (ready=false, reason cordoned) and its persisted cordon in
// line. A failure changes nothing: the next heartbeat asks again.
func (w *Worker) askInstructions(ctx context.Context) {
	msg := &protocol.Instructions{ClusterID: w.opts.ClusterID, NodeID: w.opts.NodeID, IncarnationID: w.incarnation}
	// One attempt, at the coordinator that just accepted the heartbeat
	// (the client's preferred), within half the heartbeat budget: never
	// the next one in a rotation, which may be the hung one.
	budget := heartbeatBudget(w.opts.RequestTimeout, w.hb.Status().Interval) / 2
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	resp, err := w.opts.Client.CallWith(ctx, msg, client.CallOptions{AttemptTimeout: budget, Once: true})
	if err != nil {
		w.log.Debug("instructions not answered; asking again after the next heartbeat", "err", err)
		return
	}
	in, ok := resp.(*protocol.Instructed)
	if !ok {
		return
	}
	w.applyInstructions(in)
}

// applyInstructions converges the worker's cordon on the coordinators'.
func (w *Worker) applyInstructions(in *protocol.Instructed) {
	if in.Revoked {
		w.log.Error("a coordinator found this worker's credential on its deny list: out of placement on every coordinator until it restarts with another credential")
	}
	on, persisted := w.cordon.state()
	persist := in.Cordoned && in.Persist && w.opts.CordonFile != ""
	if on == in.Cordoned && (!in.Cordoned || persisted == persist) {
		if in.Cordoned {
			w.cordon.noteWho(in.By, in.AtUnixMs)
		}
		return
	}
	if _, err := w.cordon.set(in.Cordoned, persist); err != nil {
		w.log.Error("could not apply the operator's cordon; asking again after the next heartbeat", "cordon", in.Cordoned, "persist", persist, "err", err)
		return
	}
	w.cordon.noteWho(in.By, in.AtUnixMs)
	w.ready.Report()
	if in.Cordoned {
		w.log.Warn("cordoned by an operator through the coordinators: not ready, out of placement; still serving what is routed here", "by", in.By, "persist", persist)
	} else {
		w.log.Warn("uncordoned by an operator through the coordinators: ready again")
	}
}

// markRecordLocked sets the fields a record carries about the cordon: the
// drained flag of a cordoned worker that serves and loads nothing, and a
// persisted cordon, so a record created anew (after the old one expired)
// starts cordoned in the store. Called with w.mu held.
func (w *Worker) markRecordLocked(rec *cluster.Record) {
	on, persisted := w.cordon.state()
	if !on {
		return
	}
	rec.Drained = w.InflightRequests() == 0 && rec.Capacity.InflightLoads == 0
	if persisted {
		rec.CordonedBy, rec.CordonedAtUnixMs = w.cordon.who()
		rec.CordonPersist = true
		if rec.CordonedBy == "" {
			rec.CordonedBy = "persisted-cordon"
		}
	}
}
