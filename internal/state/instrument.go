package state

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/tracing"
)

// Instrumented is a Store whose every operation is timed on one clock,
// counted when it fails and traced as a span: the one place a process
// measures its store (dskit's kv metrics client is the model). Optional
// interfaces of the store it wraps (EventLog, CapacityReporter) are not
// forwarded: assert them on Unwrap.
//
// Concurrency: safe for concurrent use, as the wrapped store is.
type Instrumented struct {
	s        Store
	clock    func() time.Time
	tracer   trace.Tracer
	duration *prometheus.HistogramVec // operation
	failures *prometheus.CounterVec   // operation, outcome
	watches  prometheus.Gauge
}

// Store operations as the metrics and spans name them.
const (
	opUpsert     = "upsert"
	opRemove     = "remove"
	opTransition = "transition"
	opMarks      = "marks"
	opSnapshot   = "snapshot"
	opWatch      = "watch"
	opReady      = "check_ready"
)

// Instrument wraps s, registering its metrics with reg:
// talon_coordinator_store_operation_duration_seconds{operation} (for watch:
// the time to its first batch), talon_coordinator_store_errors_total
// {operation, outcome} (a cancelled call is not a failure) and
// talon_coordinator_store_watches (watches open). tp may be nil (no spans);
// clock times every operation.
func Instrument(s Store, reg prometheus.Registerer, tp trace.TracerProvider, clock func() time.Time) (*Instrumented, error) {
	constLabels := prometheus.Labels{"backend": s.Backend()}
	i := &Instrumented{
		s:      s,
		clock:  clock,
		tracer: tracing.Tracer(tp, "state"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "talon_coordinator_store_operation_duration_seconds",
			Help:        "Duration of shared-store operations (upsert, remove, transition, marks, snapshot, check_ready; watch: the time to its first batch).",
			ConstLabels: constLabels,
			Buckets:     []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"operation"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "talon_coordinator_store_errors_total",
			Help:        "Failed shared-store operations by operation and error code (a watch counts when it ends with an error).",
			ConstLabels: constLabels,
		}, []string{"operation", "outcome"}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "talon_coordinator_store_watches",
			Help:        "Watches of the shared store this process holds open.",
			ConstLabels: constLabels,
		}),
	}
	for _, c := range []prometheus.Collector{i.duration, i.failures, i.watches} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, op := range []string{opUpsert, opRemove, opTransition, opMarks, opSnapshot, opWatch, opReady} {
		i.duration.WithLabelValues(op)
	}
	// The errors an outage brings exist from the start, so the first one
	// counts in rate() and alerts and dashboards find the series.
	for _, op := range []string{opSnapshot, opUpsert, opRemove, opWatch} {
		for _, outcome := range []string{"unavailable", "timeout"} {
			i.failures.WithLabelValues(op, outcome)
		}
	}
	return i, nil
}

// Unwrap returns the store i wraps.
func (i *Instrumented) Unwrap() Store { return i.s }

// begin starts op's span and clock; end finishes both.
func (i *Instrumented) begin(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span, time.Time) {
	attrs = append(attrs, attribute.String("talon.store.backend", i.s.Backend()))
	ctx, span := i.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, span, i.clock()
}

func (i *Instrumented) end(span trace.Span, op string, start time.Time, res *WriteResult, err error) {
	i.duration.WithLabelValues(op).Observe(i.clock().Sub(start).Seconds())
	i.fail(span, op, err)
	if res != nil && err == nil {
		span.SetAttributes(attribute.String("talon.store.outcome", res.Outcome.String()), attribute.String("talon.store.revision", res.Revision.String()))
		if res.Renewed {
			span.SetAttributes(attribute.Bool("talon.store.renewed", true))
		}
	}
	span.End()
}

// fail counts and marks a failed operation; a cancelled one is not.
func (i *Instrumented) fail(span trace.Span, op string, err error) {
	if err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, Code(err))
	if !errors.Is(err, context.Canceled) {
		i.failures.WithLabelValues(op, Code(err)).Inc()
	}
}

func keyAttrs(key cluster.Key) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("talon.node.role", string(key.Role)), attribute.String("talon.node.id", key.NodeID)}
}

// UpsertNode is Store.UpsertNode, measured.
func (i *Instrumented) UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration, opts ...UpsertOption) (WriteResult, error) {
	ctx, span, start := i.begin(ctx, opUpsert, append(keyAttrs(rec.Key()), attribute.Int64("talon.node.heartbeat_seq", int64(rec.HeartbeatSeq)))...)
	res, err := i.s.UpsertNode(ctx, rec, leaseTTL, opts...)
	i.end(span, opUpsert, start, &res, err)
	return res, err
}

// RemoveNode is Store.RemoveNode, measured.
func (i *Instrumented) RemoveNode(ctx context.Context, key cluster.Key, incarnationID string) (WriteResult, error) {
	ctx, span, start := i.begin(ctx, opRemove, keyAttrs(key)...)
	res, err := i.s.RemoveNode(ctx, key, incarnationID)
	i.end(span, opRemove, start, &res, err)
	return res, err
}

// ProposeTransition is Store.ProposeTransition, measured.
func (i *Instrumented) ProposeTransition(ctx context.Context, key cluster.Key, incarnationID string, seq uint64, tr Transition, opts ...ProposeOption) (WriteResult, error) {
	ctx, span, start := i.begin(ctx, opTransition, append(keyAttrs(key), attribute.String("talon.store.transition", tr.String()))...)
	res, err := i.s.ProposeTransition(ctx, key, incarnationID, seq, tr, opts...)
	i.end(span, opTransition, start, &res, err)
	return res, err
}

// SetMarks is Store.SetMarks, measured.
func (i *Instrumented) SetMarks(ctx context.Context, key cluster.Key, incarnationID string, m MarkChange) (WriteResult, error) {
	ctx, span, start := i.begin(ctx, opMarks, keyAttrs(key)...)
	res, err := i.s.SetMarks(ctx, key, incarnationID, m)
	i.end(span, opMarks, start, &res, err)
	return res, err
}

// Snapshot is Store.Snapshot, measured.
func (i *Instrumented) Snapshot(ctx context.Context, clusterID string) (*Snapshot, error) {
	ctx, span, start := i.begin(ctx, opSnapshot)
	snap, err := i.s.Snapshot(ctx, clusterID)
	if err == nil {
		span.SetAttributes(attribute.Int("talon.store.records", len(snap.Records)), attribute.String("talon.store.revision", snap.Revision.String()))
	}
	i.end(span, opSnapshot, start, nil, err)
	return snap, err
}

// CheckReady is Store.CheckReady, measured.
func (i *Instrumented) CheckReady(ctx context.Context) error {
	ctx, span, start := i.begin(ctx, opReady)
	err := i.s.CheckReady(ctx)
	i.end(span, opReady, start, nil, err)
	return err
}

// Watch is Store.Watch, measured: its duration is the time to the first
// batch, its span lasts as long as the watch, and a batch with Err counts
// as the watch's failure. Batches are passed on in order through a
// channel of the same capacity, by a goroutine that ends with the watch.
func (i *Instrumented) Watch(ctx context.Context, clusterID string, after Revision) <-chan WatchBatch {
	ctx, span, start := i.begin(ctx, opWatch, attribute.String("talon.store.after", after.String()))
	in := i.s.Watch(ctx, clusterID, after)
	out := make(chan WatchBatch, cap(in))
	i.watches.Inc()
	go func() {
		defer close(out)
		defer i.watches.Dec()
		defer span.End()
		first, events := true, 0
		for b := range in {
			if first {
				first = false
				i.duration.WithLabelValues(opWatch).Observe(i.clock().Sub(start).Seconds())
			}
			events += len(b.Events)
			i.fail(span, opWatch, b.Err)
			select {
			case out <- b:
			case <-ctx.Done():
				span.SetAttributes(attribute.Int("talon.store.events", events))
				drain(in)
				return
			}
		}
		span.SetAttributes(attribute.Int("talon.store.events", events))
	}()
	return out
}

// drain reads ch until the backend closes it (it does once ctx ends).
func drain(ch <-chan WatchBatch) {
	for range ch { //nolint:revive // discarding is the point
	}
}

// Backend is Store.Backend.
func (i *Instrumented) Backend() string { return i.s.Backend() }

// Close is Store.Close.
func (i *Instrumented) Close() error { return i.s.Close() }

// Failures returns the failure counter, for tests that read it.
func (i *Instrumented) Failures() *prometheus.CounterVec { return i.failures }
