package etcd

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/state"
)

// DefaultCompactionInterval is the compaction interval coordinators use
// unless configured otherwise, kube-apiserver's.
const DefaultCompactionInterval = 5 * time.Minute

// compactOutcome is what one compaction round did; its String is the
// talon_state_etcd_compactions_total outcome label.
type compactOutcome int

const (
	// compactCompacted: this store took the interval and compacted.
	compactCompacted compactOutcome = iota
	// compactRecorded: this store took the interval, but no earlier
	// interval was recorded yet, so there was nothing to compact to.
	compactRecorded
	// compactLost: another coordinator took this interval (or this store
	// only learned the key); nothing was compacted.
	compactLost
	// compactAlready: etcd's history was already compacted past the
	// revision (etcd's own auto-compaction, or an operator).
	compactAlready
	// compactDenied: etcd refused the request for permission (etcd lets
	// only the root role compact).
	compactDenied
	// compactError: the round failed otherwise; it is tried again next
	// interval.
	compactError
	numCompactOutcomes
)

func (o compactOutcome) String() string {
	return [...]string{"compacted", "recorded", "lost", "already_compacted", "permission_denied", "error"}[o]
}

// compactor compacts etcd's history once per interval across every
// coordinator of the prefix, as kube-apiserver's compactor does for its
// etcd. Each round is one transaction on the compaction key:
//
//	Txn If(ModRevision(<prefix>/compaction) == lastSeen)
//	    Then(Put(<prefix>/compaction, lastSeen))
//	    Else(Get(<prefix>/compaction))
//
// The store whose compare holds took the interval: the key's mod revision
// moves to now, and it compacts to lastSeen, the revision at which the
// previous round took its interval. The others learn the key's new mod
// revision and try again an interval later. A store wins only when nobody
// wrote the key since it last saw it, at least one interval ago, so
// compactions are at least one interval apart cluster-wide, and each keeps
// at least one interval of history for watchers that fall behind.
type compactor struct {
	s        *Store
	interval time.Duration
	key      string

	// lastSeen is the compaction key's mod revision when this store last
	// read or wrote it (0: absent). Only the run goroutine uses it.
	lastSeen int64
	// failing is whether the last round failed: only the first failure of
	// a run of them is logged at warn.
	failing bool

	outcomes  [numCompactOutcomes]atomic.Uint64
	compacted atomic.Int64 // the last revision this store compacted to
}

func newCompactor(s *Store, interval time.Duration) *compactor {
	return &compactor{s: s, interval: interval, key: s.opts.Prefix + "/compaction"}
}

// run compacts every interval, from the store's start, until it closes.
func (c *compactor) run() {
	ctx := c.s.lifetime
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o, err := c.round(ctx)
		c.outcomes[o].Add(1)
		c.report(o, err)
		t.Reset(c.interval)
	}
}

// round is one compaction round.
func (c *compactor) round(ctx context.Context) (compactOutcome, error) {
	ctx, cancel, ci, err := c.s.begin(ctx, "compact")
	if err != nil {
		return compactError, err
	}
	defer cancel()
	prev := c.lastSeen
	resp, err := c.s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(c.key), "=", prev)).
		Then(clientv3.OpPut(c.key, strconv.FormatInt(prev, 10))).
		Else(clientv3.OpGet(c.key)).
		Commit()
	if err != nil {
		err = c.s.mapError("compaction record", err, ci)
		return failedOutcome(err), err
	}
	if !resp.Succeeded {
		c.lastSeen = 0
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			c.lastSeen = r.Kvs[0].ModRevision
		}
		return compactLost, nil
	}
	c.lastSeen = resp.Header.Revision
	if prev == 0 {
		return compactRecorded, nil
	}
	if _, err := c.s.client.Compact(ctx, prev); err != nil {
		err = c.s.mapError("compact", err, ci)
		if errors.Is(err, state.ErrCompacted) {
			return compactAlready, nil
		}
		return failedOutcome(err), err
	}
	c.compacted.Store(prev)
	return compactCompacted, nil
}

// failedOutcome classifies a failed round.
func failedOutcome(err error) compactOutcome {
	if errors.Is(err, state.ErrPermissionDenied) || errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) {
		return compactDenied
	}
	return compactError
}

// report logs a round: a failure at warn when the previous round did not
// fail (with what to do), later ones at debug.
func (c *compactor) report(o compactOutcome, err error) {
	switch {
	case err == nil:
		if c.failing {
			c.s.log.Info("etcd compaction works again", "outcome", o.String())
		}
		c.failing = false
		c.s.log.Debug("etcd compaction round", "outcome", o.String(), "key", c.key, "keyRevision", c.lastSeen)
	case c.failing:
		c.s.log.Debug("etcd compaction failed again", "outcome", o.String(), "err", err)
	default:
		c.failing = true
		hint := "it is tried again next interval"
		if o == compactDenied {
			hint = "etcd lets only the root role compact: grant Talon's etcd user the root role, or run etcd with --auto-compaction-retention and set etcd-compaction-interval 0"
		}
		c.s.log.Warn("etcd compaction failed", "outcome", o.String(), "err", err, "hint", hint)
	}
}

// Compactions returns how many compaction rounds ended in each outcome
// (keyed by the metric's outcome label) and the last revision this store
// compacted to (0: none). Without compaction (Options.CompactionInterval
// 0) it returns nil and 0.
func (s *Store) Compactions() (map[string]uint64, int64) {
	if s.compactor == nil {
		return nil, 0
	}
	out := make(map[string]uint64, numCompactOutcomes)
	for o := range numCompactOutcomes {
		out[o.String()] = s.compactor.outcomes[o].Load()
	}
	return out, s.compactor.compacted.Load()
}

// startMaintenance starts the compaction and capacity goroutines the
// options ask for (New made the capacity monitor before any request, so
// that the conn tells it of a full database).
func (s *Store) startMaintenance() {
	if s.capacity != nil {
		s.spawn(s.capacity.run)
	}
	if s.opts.CompactionInterval > 0 {
		s.compactor = newCompactor(s, s.opts.CompactionInterval)
		s.spawn(s.compactor.run)
	}
}
