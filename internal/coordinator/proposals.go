package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// proposer sends the liveness transitions (late, expired) that the
// evidence finds due, and the revocations the deny list asks for, to the
// store, one at a time on one goroutine (run). Every coordinator proposes
// alike; the store applies a proposal only to the version it names. A read
// offers what it found (offer); a full queue leaves the rest for the next
// read.
type proposer struct {
	*Coordinator
	proposals   chan proposal   // transitions for run
	revocations chan revocation // deny-listed records for run to mark

	mu            sync.Mutex // guards revokeChecked; a leaf
	revokeChecked time.Time  // when the view was last compared with the deny list
}

func newProposer(c *Coordinator) *proposer {
	return &proposer{
		Coordinator: c,
		proposals:   make(chan proposal, maxQueuedProposals),
		revocations: make(chan revocation, maxQueuedProposals),
	}
}

// offer queues what a read found due: the transitions the evidence
// proposes and the records the deny list refuses.
func (p *proposer) offer(v *View, start time.Time) {
	for _, pr := range p.evidence.observeThrottled(v.Snapshot.Records, start) {
		select {
		case p.proposals <- pr:
		default: // the proposer is behind; the next read proposes again
		}
	}
	for _, r := range p.dueRevocations(v, start) {
		select {
		case p.revocations <- r:
		default: // the next comparison finds it again
		}
	}
}

// maxQueuedProposals bounds the transitions waiting for the proposer; a
// read that finds the queue full leaves the rest for the next read.
const maxQueuedProposals = 256

// run sends the transitions the evidence finds due to the store,
// one at a time, until ctx ends. Every coordinator proposes alike; the
// store applies a proposal only to the version it names.
func (p *proposer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pr := <-p.proposals:
			p.propose(ctx, pr)
		case r := <-p.revocations:
			p.revoke(ctx, r)
		}
	}
}

func (p *proposer) propose(ctx context.Context, pr proposal) {
	pctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	res, err := p.store.ProposeTransition(pctx, pr.key, pr.incarnation, pr.seq, pr.transition, state.MinSilence(silenceFor(p.opts.Timing, pr.transition)))
	outcome := state.Code(err)
	if err == nil {
		outcome = res.Outcome.String()
	} else {
		p.noteStoreError("transition", 0, err)
	}
	if err == nil && res.Renewed {
		// The store says the lease was renewed since: heartbeats that only
		// renew show in no version, so its clock counts from the renewal.
		outcome = "renewed"
		// RenewedAgo is a lower bound (the store's clock counts whole
		// seconds): as a heartbeat time, count a second more.
		p.evidence.renewed(pr, p.mono().Add(-res.RenewedAgo), p.now().Add(-res.RenewedAgo-time.Second).UnixMilli())
	}
	p.m.transitions.WithLabelValues(pr.transition.String(), outcome).Inc()
	if err == nil && res.Outcome == state.OutcomeAccepted {
		p.log.Warn("record unchanged for too long: proposed to the store and applied", "transition", pr.transition.String(),
			"role", string(pr.key.Role), "node", pr.key.NodeID, "incarnation", pr.incarnation, "heartbeat_seq", pr.seq)
		p.refresh.request()
	}
}

// silenceFor is how long a record's lease must have gone unrenewed, by
// the store's clock, for transition tr to apply: the same thresholds the
// evidence counts on this coordinator's clock.
func silenceFor(t cluster.Timing, tr state.Transition) time.Duration {
	if tr == state.TransitionExpire {
		return t.LeaseTTL
	}
	return t.UnhealthyAfter
}

// revocation is one record a coordinator's deny list refuses.
type revocation struct {
	key         cluster.Key
	incarnation string
	entry       string
}

// revokeEvery is how often a coordinator compares its view with its deny
// list: a quarter of the heartbeat interval, so a deny-listed worker is
// out of placement everywhere within one heartbeat interval of the entry
// (the comparison, one store write, and every coordinator's next read).
func (p *proposer) revokeEvery() time.Duration { return p.opts.Timing.HeartbeatInterval / 4 }

// dueRevocations returns the records of v that this coordinator's deny
// list refuses and the store does not mark revoked yet, at most once per
// revokeEvery (nil otherwise, or without a deny list).
func (p *proposer) dueRevocations(v *View, now time.Time) []revocation {
	if p.opts.DenyRecord == nil {
		return nil
	}
	p.mu.Lock()
	if now.Sub(p.revokeChecked) < p.revokeEvery() {
		p.mu.Unlock()
		return nil
	}
	p.revokeChecked = now
	p.mu.Unlock()
	var due []revocation
	for _, r := range v.Snapshot.Records {
		if r.Role != cluster.RoleWorker || r.Revoked() {
			continue
		}
		if entry, denied := p.opts.DenyRecord(r.Role, r.NodeID, r.CredentialSerial); denied {
			due = append(due, revocation{key: r.Key(), incarnation: r.IncarnationID, entry: entry})
		}
	}
	return due
}

// revoke marks one deny-listed incarnation revoked in the store, so that
// every coordinator leaves it out of placement at its next read.
func (p *proposer) revoke(ctx context.Context, r revocation) {
	rctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	res, err := p.store.SetMarks(rctx, r.key, r.incarnation, state.MarkChange{RevokedBy: p.opts.NodeID, RevokedReason: r.entry})
	if err != nil {
		p.noteStoreError("marks", 0, err)
		return
	}
	if res.Outcome == state.OutcomeAccepted {
		p.log.Warn("audit: deny-listed worker revoked in the store: out of placement on every coordinator", "audit", true,
			"node", r.key.NodeID, "incarnation", r.incarnation, "entry", r.entry)
		p.refresh.request()
	}
}
