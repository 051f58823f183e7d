package worker

import (
	"fmt"

	"github.com/talonhq/talon/internal/readiness"
)

// The worker's readiness conditions besides the shared ones
// (readiness.Draining, readiness.OwnRecord), in the order /readyz lists
// them.
const (
	condCordoned readiness.Condition = "cordoned"  // an operator's cordon
	condDisk     readiness.Condition = "cache_dir" // new disk errors, heartbeat after heartbeat
)

var readinessOrder = []readiness.Condition{readiness.Draining, condCordoned, condDisk, readiness.OwnRecord}

// newReadiness builds the worker's readiness tracker. Draining is set by
// Run's shutdown; the cordon, the disk-error streak and the own record
// are probed on every report from the state that holds them.
func (w *Worker) newReadiness() *readiness.Tracker {
	t := readiness.New(readiness.Options{Role: "worker", Order: readinessOrder, Logger: w.log})
	t.Probe(condCordoned, func() string {
		if on, _ := w.cordon.state(); on {
			return CordonReason
		}
		return ""
	})
	t.Probe(condDisk, func() string {
		w.mu.Lock()
		streak := w.diskStreak
		w.mu.Unlock()
		if streak >= DiskErrorStreak {
			return fmt.Sprintf("cache directory failing: new disk errors in %d heartbeats in a row", streak)
		}
		return ""
	})
	t.Probe(readiness.OwnRecord, func() string {
		st := w.hb.Status()
		return readiness.OwnRecordReason(st.Registered, st.Refusal, "warming up: not yet registered with a coordinator", st.Err)
	})
	return t
}
