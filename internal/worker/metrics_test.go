package worker_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/worker"
)

// counterValue returns the value of the series of counter name with the
// given label name/value pairs in g, or 0 when it has not been gathered.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestMetrics: New registers the worker's series with Options.Registerer
// under their names, help and labels; a heartbeat's outcome is counted;
// they pass promlint; and a second worker on the same registry is refused
// rather than sharing (or shadowing) the first one's series.
func TestMetrics(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	reg := prometheus.NewRegistry()
	w := newWorkerOpts(t, []string{a}, false, 0, func(*worker.Worker) http.Handler { return http.NotFoundHandler() }, func(o *worker.Options) {
		o.Registerer = reg
	})
	const want = `# HELP talon_worker_data_connections_refused_total Data connections refused by reason: closed at accept past a cap (connections, connections_per_address, pending, pending_per_address), or at the first request (connections_per_identity: the credential holds its share; worker_credential: workers read no other worker's data).
# TYPE talon_worker_data_connections_refused_total counter
talon_worker_data_connections_refused_total{reason="connections"} 0
talon_worker_data_connections_refused_total{reason="connections_per_address"} 0
talon_worker_data_connections_refused_total{reason="connections_per_identity"} 0
talon_worker_data_connections_refused_total{reason="pending"} 0
talon_worker_data_connections_refused_total{reason="pending_per_address"} 0
talon_worker_data_connections_refused_total{reason="worker_credential"} 0
# HELP talon_worker_data_timeouts_total Data connections ended by a timeout: read (idle-timeout, frame-timeout for a request header or TLS handshake) or write (write-timeout).
# TYPE talon_worker_data_timeouts_total counter
talon_worker_data_timeouts_total{reason="read"} 0
talon_worker_data_timeouts_total{reason="write"} 0
# HELP talon_worker_job_blocks_total Blocks the operator's cache jobs loaded from the store (operation warm: resident ones are not counted) or evicted (operation free).
# TYPE talon_worker_job_blocks_total counter
talon_worker_job_blocks_total{operation="free"} 0
talon_worker_job_blocks_total{operation="warm"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatalf("before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testsupport.WaitFor(t, 5*time.Second, "worker ready", func() bool { return w.Readiness().Ready })
	testsupport.WaitFor(t, 5*time.Second, "the registration counted", func() bool {
		return counterValue(t, reg, "talon_worker_heartbeats_total", "operation", "register", "outcome", "accepted") == 1
	})
	testsupport.WaitFor(t, 5*time.Second, "a heartbeat counted", func() bool {
		return counterValue(t, reg, "talon_worker_heartbeats_total", "operation", "heartbeat", "outcome", "accepted") >= 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	testsupport.LintMetrics(t, reg, "talon_worker_", 4)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := client.New(client.Options{Coordinators: []string{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	proc, err := metrics.NewProcess(prometheus.NewRegistry(), "worker")
	if err != nil {
		t.Fatal(err)
	}
	_, err = worker.New(worker.Options{
		ClusterID: "test", NodeID: "w2", Coordinators: []string{a}, Timing: timing,
		DataListener: ln, DataHandler: http.NotFoundHandler(), Client: cl,
		Logger: discard(), Clock: time.Now, Registerer: reg, Process: proc,
	})
	if err == nil || !strings.Contains(err.Error(), "worker metrics") {
		t.Fatalf("a second worker on the same registry: %v, want a registration error", err)
	}
	if _, err := worker.New(worker.Options{
		ClusterID: "test", NodeID: "w2", Coordinators: []string{a}, Timing: timing,
		DataListener: ln, DataHandler: http.NotFoundHandler(), Client: cl,
		Logger: discard(), Clock: time.Now, Process: proc,
	}); err == nil || !strings.Contains(err.Error(), "Registerer") {
		t.Fatalf("no Registerer: %v, want an error naming it", err)
	}
}
