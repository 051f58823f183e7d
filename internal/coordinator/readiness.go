package coordinator

import (
	"strings"

	"github.com/talonhq/talon/internal/readiness"
	"github.com/talonhq/talon/internal/state"
)

// The coordinator's readiness conditions besides the shared ones
// (readiness.Draining, readiness.OwnRecord), in the order /readyz lists
// them.
const (
	condStore       readiness.Condition = "store"        // unreachable, or not answered yet
	condAlarms      readiness.Condition = "store_alarms" // etcd NOSPACE, CORRUPT
	condSnapshot    readiness.Condition = "snapshot"     // no cluster snapshot yet
	condRecovery    readiness.Condition = "recovery"     // the recovery hold after an outage
	condUnconfirmed readiness.Condition = "unconfirmed"  // no read confirmed the view lately
)

var readinessOrder = []readiness.Condition{
	readiness.Draining, condStore, condAlarms, condSnapshot, condRecovery, condUnconfirmed, readiness.OwnRecord,
}

// newReadiness builds the coordinator's readiness tracker. Draining is
// set by shutdown; the rest follow the view, the store and the own-record
// loop, state that moves on its own (a recovery hold ends with time), so
// they are probed on every report. Each change of readiness is logged
// once and becomes a self_ready or self_unready event.
func (c *Coordinator) newReadiness() *readiness.Tracker {
	t := readiness.New(readiness.Options{
		Role: "coordinator", Order: readinessOrder, Logger: c.log,
		OnChange: c.readinessChanged,
	})
	t.ProbeAll(condStore, func() []string {
		vs := c.view.state()
		var rs []string
		switch {
		case !vs.storeOK && vs.lastErr != nil:
			rs = append(rs, "store unreachable: "+vs.lastErr.Error())
		case !vs.storeOK:
			rs = append(rs, "warming up: the store has not answered yet")
		}
		return rs
	})
	t.ProbeAll(condAlarms, c.storeAlarmReasons)
	t.Probe(condSnapshot, func() string {
		if !c.view.state().synced {
			return "warming up: no cluster snapshot yet"
		}
		return ""
	})
	t.Probe(condRecovery, func() string {
		if !c.view.state().storeOK {
			return ""
		}
		return c.view.recoveryReason(c.mono())
	})
	t.Probe(condUnconfirmed, c.unconfirmedReason)
	t.Probe(readiness.OwnRecord, func() string {
		st := c.self.loop.Status()
		return readiness.OwnRecordReason(st.Registered, st.Refusal, "warming up: own record not yet accepted by the store", nil)
	})
	return t
}

// readinessChanged adds a change of readiness to the event log: every
// change once the coordinator has been ready, and the first time it is.
func (c *Coordinator) readinessChanged(ch readiness.Change) {
	if c.events == nil || (ch.First && !ch.Ready) {
		return
	}
	e := Event{NodeEvent: state.NodeEvent{Type: state.EventSelfReady, Old: "not_ready", New: "ready", Reason: ch.Was}}
	switch {
	case !ch.Ready:
		e = Event{NodeEvent: state.NodeEvent{Type: state.EventSelfUnready, Old: "ready", New: "not_ready", Reason: strings.Join(ch.Reasons, "; ")}}
	case ch.First:
		e.Old = ""
	default:
		e.Reason = "was: " + ch.Was
	}
	c.events.add(e)
}
