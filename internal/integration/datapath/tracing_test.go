package datapath

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestTracesReachJaeger runs a coordinator and a worker that export
// OpenTelemetry traces to a real Jaeger (OTLP/HTTP from the coordinator,
// OTLP/gRPC from the worker, both configured only by OTEL_* variables) and
// checks, through Jaeger's query API, the spans an operator relies on:
// heartbeats with their store write nested in them, placement lookups,
// block loads with the blob fetch nested in them; that a log line names a
// trace Jaeger has; and that the coordinator's buffered spans reach
// Jaeger when it shuts down (its batch delay is ten minutes, so only the
// flush on shutdown can have sent them).
func TestTracesReachJaeger(t *testing.T) {
	talontest.SkipShort(t)
	j := testenv.StartJaeger(t)
	blobs := t.TempDir()
	want := talontest.WriteBlob(t, blobs, "traced/obj", 3*talontest.BlockSize, 41)

	ctl := talontest.FreeAddr(t)
	coordEnv := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPHTTP, "OTEL_BSP_SCHEDULE_DELAY=600000",
		"OTEL_BSP_MAX_QUEUE_SIZE=200000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=200000"}
	coord := talontest.StartWithEnv(t, "coordinator", coordEnv, talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), "--drain-delay", "0s")...)
	testsupport.WaitFor(t, 30*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	workerEnv := []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPGRPC,
		"OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_BSP_SCHEDULE_DELAY=200"}
	worker := talontest.StartWithEnv(t, "worker-1", workerEnv, talontest.WorkerArgs("worker-1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), "--log-format", "json")...)
	testsupport.WaitFor(t, 30*time.Second, "worker eligible", func() bool {
		cl, err := coord.API(t).Cluster(context.Background())
		return err == nil && cl.EligibleWorkers == 1
	})

	cl, err := client.New(client.Options{Coordinators: []string{ctl}, CacheTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	reader := &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: 30 * time.Second}, BlockSize: talontest.BlockSize, Replicas: 1}
	var got bytes.Buffer
	if _, err := reader.ReadObject(context.Background(), "traced/obj", &got); err != nil || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("cold read: %d bytes, err %v", got.Len(), err)
	}

	// The worker: block loads with the blob fetch inside, and heartbeats.
	ctx := context.Background()
	var loads []testenv.Trace
	testsupport.WaitFor(t, 60*time.Second, "the worker's cache.load traces in jaeger", func() bool {
		loads, err = j.Traces(ctx, "talon-worker", "cache.load", 20)
		return err == nil && len(loads) >= 3
	})
	fetched := int64(0)
	for _, tr := range loads {
		load, read := spanNamed(tr, "cache.load"), spanNamed(tr, "blob.read")
		if load == nil || read == nil || read.Parent() != load.SpanID {
			t.Fatalf("trace %s: want blob.read as a child of cache.load, got %s", tr.TraceID, spanNames(tr))
		}
		if obj := read.Tag("talon.blob.object"); obj != "traced/obj" {
			t.Errorf("blob.read object tag %v, want traced/obj", obj)
		}
		n, _ := read.Tag("talon.blob.bytes").(float64)
		fetched += int64(n)
		if p := tr.Processes[load.ProcessID]; processTag(p.Tags, "service.instance.id") != "worker-1" {
			t.Errorf("cache.load process tags %v: want service.instance.id worker-1", p.Tags)
		}
	}
	if fetched != int64(len(want)) {
		t.Errorf("blob.read spans account for %d bytes; the object has %d", fetched, len(want))
	}
	testsupport.WaitFor(t, 30*time.Second, "the worker's heartbeat spans", func() bool {
		hb, err := j.Traces(ctx, "talon-worker", "heartbeat", 5)
		return err == nil && len(hb) > 0
	})

	// A log line leads to its trace: the worker's registration.
	regTrace := logTraceID(t, worker.Out.String(), "own record accepted")
	tr, err := j.TraceByID(ctx, regTrace)
	if err != nil || spanNamed(tr, "register") == nil {
		t.Fatalf("the trace %s the worker's log names: %v, spans %s; want its register span", regTrace, err, spanNames(tr))
	}

	// The coordinator has exported nothing yet (ten-minute batches) ...
	if trs, err := j.Traces(ctx, "talon-coordinator", "", 10); err != nil || len(trs) != 0 {
		t.Fatalf("coordinator spans before shutdown: %d (err %v); want none, the batch delay is ten minutes", len(trs), err)
	}
	// ... and its shutdown flushes them.
	coord.Signal(syscall.SIGTERM)
	testsupport.WaitFor(t, 30*time.Second, "coordinator exits", coord.Exited)
	var hbs, lookups []testenv.Trace
	testsupport.WaitFor(t, 30*time.Second, "the coordinator's flushed spans", func() bool {
		hbs, _ = j.Traces(ctx, "talon-coordinator", "control.heartbeat", 50)
		lookups, _ = j.Traces(ctx, "talon-coordinator", "control.placement_lookup", 50)
		return len(hbs) > 0 && len(lookups) > 0
	})
	nested := 0
	for _, tr := range hbs {
		hb, up := spanNamed(tr, "control.heartbeat"), spanNamed(tr, "store.upsert")
		if hb != nil && up != nil && up.Parent() == hb.SpanID {
			nested++
		}
	}
	if nested == 0 {
		t.Fatalf("none of %d control.heartbeat traces has its store.upsert span as a child", len(hbs))
	}
	t.Logf("worker: %d cache.load traces (%d bytes fetched); coordinator: %d heartbeat traces (%d with the store write nested), %d lookup traces, all flushed at shutdown",
		len(loads), fetched, len(hbs), nested, len(lookups))
}

func spanNamed(tr testenv.Trace, name string) *testenv.Span {
	for i := range tr.Spans {
		if tr.Spans[i].OperationName == name {
			return &tr.Spans[i]
		}
	}
	return nil
}

func spanNames(tr testenv.Trace) string {
	var names []string
	for _, s := range tr.Spans {
		names = append(names, s.OperationName)
	}
	return "[" + strings.Join(names, " ") + "]"
}

func processTag(tags []struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}, key string) any {
	for _, tg := range tags {
		if tg.Key == key {
			return tg.Value
		}
	}
	return nil
}

// logTraceID returns the trace_id of the first JSON log line whose msg is msg.
func logTraceID(t *testing.T, out, msg string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != msg {
			continue
		}
		id, _ := line["trace_id"].(string)
		if len(id) != 32 {
			t.Fatalf("log line %q has no trace_id: %s", msg, sc.Text())
		}
		return id
	}
	t.Fatalf("no JSON log line %q in:\n%s", msg, talontest.Tail(out, 3000))
	return fmt.Sprint()
}
