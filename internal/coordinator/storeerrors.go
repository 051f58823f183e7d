package coordinator

import (
	"context"
	"errors"

	"github.com/talonhq/talon/internal/state"
)

// noteStoreError records a failed store operation. Only a failed snapshot
// read (seq > 0, applied in start order) makes the coordinator fail closed:
// a lost write race, an invalid record or a broken watch say nothing about
// whether it can answer from a current view.
func (c *Coordinator) noteStoreError(op string, seq uint64, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if op != "snapshot" {
		c.storeErrors.Add(1)
		c.log.Debug("store operation failed", "operation", op, "error", err)
		return
	}
	ok, wasOK := c.view.failed(seq, err)
	if !ok {
		return // a later-started read already decided
	}
	c.storeErrors.Add(1)
	c.evidence.interrupt()
	if wasOK {
		c.addEvent(Event{NodeEvent: state.NodeEvent{Type: state.EventStoreUnreachable, Reason: err.Error()}})
		c.log.Warn("store unreachable: failing closed (unready, lookups refused)", "operation", op, "error", err)
	}
	if lastGood := c.LastGood(); lastGood != nil {
		c.m.snapshotAge.Set(c.now().Sub(lastGood.ObservedAt).Seconds())
	}
	c.updateReadyMetric()
}
