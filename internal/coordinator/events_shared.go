package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/state"
)

const (
	// sharedEventsQueue bounds the node events waiting to be written to
	// the store: a write never blocks a heartbeat or a placement; past
	// the bound an event is dropped and counted.
	sharedEventsQueue = 256
	// sharedEventsResync is how often the coordinator reads the store's
	// events to learn those other coordinators wrote that it did not
	// observe itself (at start: every event kept).
	sharedEventsResync = 30 * time.Second
	// sharedEventsSlack is how far before the newest event it read a
	// resync reads again: writers' clocks and write delays differ.
	sharedEventsSlack = time.Minute
	// DefaultEventMaxAge is how long events are listed.
	DefaultEventMaxAge = state.DefaultEventMaxAge
)

// sharedEvents writes this coordinator's node events to the store's
// shared event log and reads the log back into the local list, so that
// every coordinator lists each node event once and keeps them across
// restarts. Its goroutine (run) belongs to the coordinator.
type sharedEvents struct {
	store   state.EventLog
	cluster string
	self    string
	local   *eventLog
	log     *slog.Logger
	timeout time.Duration
	queue   chan state.NodeEvent
	// priority carries operator and security events (protectedEvent),
	// written before any of queue's, so that no flood of worker-driven
	// events makes the writer drop one (issue 47).
	priority chan state.NodeEvent
	// dropped counts node events not written, by reason (queue_full,
	// store_error); written counts writes by outcome (created, duplicate).
	dropped *prometheus.CounterVec
	written *prometheus.CounterVec
}

func newSharedEvents(store state.EventLog, clusterID, self string, local *eventLog, log *slog.Logger, timeout time.Duration) *sharedEvents {
	return &sharedEvents{
		store: store, cluster: clusterID, self: self, local: local, log: log, timeout: timeout,
		queue: make(chan state.NodeEvent, sharedEventsQueue), priority: make(chan state.NodeEvent, sharedEventsQueue),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_coordinator_events_dropped_total",
			Help: "Node events not written to the store's shared event log, by reason (queue_full, store_error).",
		}, []string{"reason"}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_coordinator_events_written_total",
			Help: "Node events offered to the store's shared event log, by outcome (created; duplicate: another coordinator wrote it first).",
		}, []string{"outcome"}),
	}
}

// offer queues e for the store without blocking; a full queue drops it.
func (s *sharedEvents) offer(e Event) {
	if s == nil || e.ID == "" {
		return
	}
	ev := e.NodeEvent
	ev.ClusterID, ev.Coordinator = s.cluster, s.self
	q := s.queue
	if protectedEvent(e.Type) {
		q = s.priority
	}
	select {
	case q <- ev:
	default:
		s.dropped.WithLabelValues("queue_full").Inc()
	}
}

// run writes queued events and resyncs until ctx ends. When the log
// streams (state.EventWatcher), events other coordinators write are added
// as they arrive, and a failed watch is followed by a resync and a new
// watch a second later.
func (s *sharedEvents) run(ctx context.Context) {
	var since time.Time
	since = s.resync(ctx, since)
	tick := time.NewTicker(sharedEventsResync)
	defer tick.Stop()
	watcher, _ := s.store.(state.EventWatcher)
	var watched <-chan state.NodeEvent
	var rewatch <-chan time.Time
	if watcher != nil {
		watched = watcher.WatchEvents(ctx, s.cluster)
	}
	for {
		select {
		case ev := <-s.priority:
			s.write(ctx, ev)
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return
		case ev := <-s.priority:
			s.write(ctx, ev)
		case ev := <-s.queue:
			s.write(ctx, ev)
		case <-tick.C:
			since = s.resync(ctx, since)
		case ev, ok := <-watched:
			if !ok {
				watched, rewatch = nil, time.After(time.Second)
				continue
			}
			s.learn(ev)
			if ev.Time.After(since) {
				since = ev.Time
			}
		case <-rewatch:
			rewatch = nil
			since = s.resync(ctx, since)
			watched = watcher.WatchEvents(ctx, s.cluster)
		}
	}
}

func (s *sharedEvents) write(ctx context.Context, ev state.NodeEvent) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	created, err := s.store.AppendEvent(ctx, ev)
	switch {
	case err != nil && ctx.Err() == nil:
		s.dropped.WithLabelValues("store_error").Inc()
		s.log.Debug("node event not written to the store", "type", ev.Type, "node", ev.NodeID, "error", err)
	case err != nil:
	case created:
		s.written.WithLabelValues("created").Inc()
	default:
		s.written.WithLabelValues("duplicate").Inc()
	}
}

// resync adds the store's events at or after since (less the slack) that
// the local list does not hold, and returns the time to read from next.
func (s *sharedEvents) resync(ctx context.Context, since time.Time) time.Time {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	from := since
	if !from.IsZero() {
		from = from.Add(-sharedEventsSlack)
	}
	evs, err := s.store.ListEvents(ctx, s.cluster, from, 0)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Debug("could not read the store's events", "error", err)
		}
		return since
	}
	for _, ev := range evs {
		s.learn(ev)
		if ev.Time.After(since) {
			since = ev.Time
		}
	}
	return since
}

// learn adds an event of the store's log to the local list (which drops
// one it holds by ID).
func (s *sharedEvents) learn(ev state.NodeEvent) {
	if ev.Coordinator == s.self {
		ev.Coordinator = ""
	}
	s.local.add(Event{NodeEvent: ev})
}

func (s *sharedEvents) collectors() []prometheus.Collector {
	if s == nil {
		return nil
	}
	return []prometheus.Collector{s.dropped, s.written}
}

// addEvent adds e to the local list and, for a node event (one with an
// ID), queues it for the store's shared event log.
func (c *Coordinator) addEvent(e Event) {
	if stamped, added := c.events.add(e); added {
		c.shared.offer(stamped)
	}
}

// openSharedEvents sets up the shared event log (Options.Events, or the
// Store's) and registers its metrics.
func (c *Coordinator) openSharedEvents() error {
	log := c.opts.Events
	if log == nil {
		log, _ = c.opts.Store.(state.EventLog)
	}
	if log == nil {
		return nil
	}
	c.shared = newSharedEvents(log, c.opts.ClusterID, c.opts.NodeID, c.events, c.log, c.opts.RequestTimeout)
	if c.opts.Registerer == nil {
		return nil
	}
	for _, m := range c.shared.collectors() {
		if err := c.opts.Registerer.Register(m); err != nil {
			return fmt.Errorf("coordinator metrics: %w", err)
		}
	}
	return nil
}
