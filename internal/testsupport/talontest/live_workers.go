package talontest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
)

// PairWithWorkers starts coordinators coord-a and coord-b and n workers
// that heartbeat through both, and waits until both place on every worker.
func (c *LiveCluster) PairWithWorkers(t *testing.T, n int) (a, b *Proc) {
	t.Helper()
	a, b = c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return Ready(t, a) && Ready(t, b) })
	for i := 1; i <= n; i++ {
		c.Worker(fmt.Sprintf("worker-%d", i), []string{a.Addr, b.Addr}, LiveTiming{})
	}
	WaitEligible(t, 60*time.Second, n, a, b)
	return a, b
}

// WorkerRecordIDs identifies every stored worker record by incarnation of
// its slot (etcd: the key's create revision; Kubernetes: the Lease's
// UID): a record that expired and was created again changes its ID.
func (c *LiveCluster) WorkerRecordIDs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	if c.EtcdClient != nil {
		for k, rev := range c.WorkerKeys(t) {
			out[k] = strconv.FormatInt(rev, 10)
		}
		return out
	}
	for k, uid := range c.LeaseUIDs(t) {
		if strings.HasPrefix(k, "worker/") {
			out[k] = uid
		}
	}
	return out
}
