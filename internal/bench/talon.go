package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// DefaultBackoff is how long a simulated worker waits, with jitter, after
// an unavailable answer before its next heartbeat.
const DefaultBackoff = 50 * time.Millisecond

// HeartbeatOptions configures Heartbeats.
type HeartbeatOptions struct {
	// Coordinators are control addresses; writer w talks to
	// Coordinators[w % len(Coordinators)] over its own connection.
	Coordinators []string
	ClusterID    string
	// NodePrefix starts the simulated workers' node IDs.
	NodePrefix string
	Writers    int
	Duration   time.Duration
	// TLS is the client configuration for the coordinators; nil is plain
	// TCP.
	TLS *tls.Config
	// Backoff is the pause after an unavailable answer; default
	// DefaultBackoff.
	Backoff time.Duration
	// Registered, when set, is called once every writer has registered,
	// just before the heartbeats start.
	Registered func()
	// RegisterAttempts bounds the attempts of a registration the
	// coordinator sheds; default 21.
	RegisterAttempts int
	// Source, when set, is the local address the writers dial from: a
	// coordinator takes at most half its connections from one address,
	// so a big simulated fleet spreads over several.
	Source string
}

// Heartbeats registers Writers simulated workers (the typical record)
// through the coordinators and then has each heartbeat back to back for
// Duration, measuring Talon's heartbeat path end to end: protocol, the
// coordinator, its store and the backend (Register, then one Run).
func Heartbeats(ctx context.Context, o HeartbeatOptions) (Result, error) {
	h, err := Register(ctx, o)
	if err != nil {
		return Result{}, err
	}
	defer h.Close()
	if o.Registered != nil {
		o.Registered()
	}
	return h.Run(ctx, o.Duration), nil
}

// Heartbeaters are simulated workers registered through coordinators,
// each with a connection of its own, ready to heartbeat in as many phases
// as asked (Run). Their heartbeat sequences go on from one Run to the
// next, as a real worker's would across a pause. Close closes the
// connections; the records stay in the store.
type Heartbeaters struct {
	o       HeartbeatOptions
	clients []*client.Client
	recs    []*cluster.Record // recs[w] is touched only by writer w's goroutine
}

// Register registers o.Writers simulated workers through o.Coordinators
// (a registration the coordinator sheds is retried, up to 20 times) and
// returns them ready to heartbeat. o.Duration and o.Registered are not
// used.
func Register(ctx context.Context, o HeartbeatOptions) (*Heartbeaters, error) {
	if len(o.Coordinators) == 0 || o.Writers < 1 {
		return nil, errors.New("heartbeats: need coordinators and at least one writer")
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.NodePrefix == "" {
		o.NodePrefix = "bench-hb-"
	}
	if o.RegisterAttempts < 1 {
		o.RegisterAttempts = 21
	}
	h := &Heartbeaters{o: o, clients: make([]*client.Client, o.Writers), recs: make([]*cluster.Record, o.Writers)}
	for w := range o.Writers {
		co := client.Options{Coordinators: []string{o.Coordinators[w%len(o.Coordinators)]}, Retries: -1, MaxIdleConns: 1, TLS: o.TLS}
		if o.Source != "" {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(o.Source)}}
			co.Dial = d.DialContext
		}
		cl, err := client.New(co)
		if err != nil {
			h.Close()
			return nil, err
		}
		h.clients[w] = cl
		h.recs[w] = Record(o.ClusterID, fmt.Sprintf("%s%05d", o.NodePrefix, w), 1)
	}
	if err := parallel(ctx, o.Writers, 64, h.register); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// register registers writer w, retrying what a loaded coordinator sheds
// up to RegisterAttempts times in all.
func (h *Heartbeaters) register(ctx context.Context, w int) error {
	msg, err := protocol.NewRegister(h.recs[w])
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		resp, err := h.clients[w].Call(ctx, msg)
		if err == nil {
			if a, ok := resp.(*protocol.Ack); ok && attempt > 0 && a.Outcome == protocol.OutcomeDuplicate {
				return nil // an attempt that timed out had landed: the record is there
			}
			return accepted(resp)
		}
		if !protocol.Retryable(err) || attempt+1 >= h.o.RegisterAttempts || ctx.Err() != nil {
			return fmt.Errorf("register simulated worker %s: %w", h.recs[w].NodeID, err)
		}
		Backoff(ctx, h.o.Backoff)
	}
}

// Run has every simulated worker heartbeat back to back for d and
// measures it. After an unavailable answer a writer backs off about
// Backoff, like a real worker, instead of spinning; those count as
// BackedOff. Result.Renewals is not known here (the store counts them).
func (h *Heartbeaters) Run(ctx context.Context, d time.Duration) Result {
	return Run(ctx, h.o.Writers, d, func(ctx context.Context, w int) error {
		err := h.Beat(ctx, w)
		if protocol.IsCode(err, protocol.CodeUnavailable) {
			Backoff(ctx, h.o.Backoff)
			return fmt.Errorf("%w: %v", ErrBackedOff, err)
		}
		return err
	})
}

// Beat sends writer w's next heartbeat (its sequence number one higher)
// and returns nil when the coordinator accepted it, else the error or a
// coded error naming the outcome. Only writer w's goroutine may call it.
func (h *Heartbeaters) Beat(ctx context.Context, w int) error {
	h.recs[w].HeartbeatSeq++
	msg, err := protocol.NewHeartbeat(h.recs[w])
	if err != nil {
		return err
	}
	resp, err := h.clients[w].Call(ctx, msg)
	if err != nil {
		return err
	}
	return accepted(resp)
}

// Close closes the simulated workers' connections.
func (h *Heartbeaters) Close() {
	for _, cl := range h.clients {
		if cl != nil {
			cl.Close()
		}
	}
}

// accepted returns nil for an accepted Ack and a coded error for anything
// else.
func accepted(resp protocol.Message) error {
	a, ok := resp.(*protocol.Ack)
	if !ok {
		return &codedError{code: "unexpected_reply", err: fmt.Errorf("reply %T", resp)}
	}
	if a.Outcome != protocol.OutcomeAccepted {
		return &codedError{code: "outcome_" + a.Outcome.String(), err: fmt.Errorf("outcome %s", a.Outcome)}
	}
	return nil
}

// LookupOptions configures Lookups.
type LookupOptions struct {
	Coordinators []string
	// Callers is the number of concurrent callers, each with its own
	// pooled connection.
	Callers  int
	Duration time.Duration
	// Keys is the number of distinct keys looked up at random.
	Keys     int
	Replicas int
	TLS      *tls.Config
}

// Lookups sends placement lookups for random keys from Callers goroutines
// for Duration, without the client-side cache, and measures them. The
// first lookup must succeed (the cluster has workers and is ready).
func Lookups(ctx context.Context, o LookupOptions) (Result, error) {
	cl, err := client.New(client.Options{Coordinators: o.Coordinators, MaxIdleConns: o.Callers, Retries: -1, TLS: o.TLS})
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	if _, err := cl.Lookup(ctx, "warm-up", o.Replicas); err != nil {
		return Result{}, fmt.Errorf("first lookup failed; is the cluster up with workers? %w", err)
	}
	rngs := make([]*rand.Rand, o.Callers)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 1))
	}
	return Run(ctx, o.Callers, o.Duration, func(ctx context.Context, c int) error {
		_, err := cl.Lookup(ctx, fmt.Sprintf("bench/object-%d#0", rngs[c].IntN(o.Keys)), o.Replicas)
		return err
	}), nil
}

// Upserter is the part of a state.Store that Seed needs.
type Upserter interface {
	UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration, opts ...state.UpsertOption) (state.WriteResult, error)
}

// Seed writes workers simulated worker records (the typical record, each
// with its own address) of clusterID into s with leaseTTL, so a
// coordinator on s has workers to place keys on. A write the store sheds
// (a retryable error, such as the Kubernetes backend's write admission
// refusing past its in-flight limit) is retried after DefaultBackoff, up
// to 20 times.
func Seed(ctx context.Context, s Upserter, clusterID string, workers int, leaseTTL time.Duration) error {
	return parallel(ctx, workers, 64, func(ctx context.Context, i int) error {
		rec := Record(clusterID, fmt.Sprintf("worker-%05d", i), 1)
		rec.Address = fmt.Sprintf("10.%d.%d.%d:7500", i/65536, i/256%256, i%256)
		for attempt := 0; ; attempt++ {
			_, err := s.UpsertNode(ctx, rec, leaseTTL)
			if err == nil {
				return nil
			}
			if !state.Retryable(err) || attempt == 20 || ctx.Err() != nil {
				return fmt.Errorf("seed worker %s: %w", rec.NodeID, err)
			}
			Backoff(ctx, DefaultBackoff)
		}
	})
}
