package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// The shared event log (state.EventLog) is a bounded, leased ring:
// <prefix>/events/<cluster-id>/<event-id>, outside <prefix>/clusters/ so
// that event writes never wake the records' watches. The key is the
// event's deterministic ID, so a create-if-absent transaction
// (CreateRevision == 0) writes each event once however many coordinators
// observed it. Every key is attached to a lease shared by the events of
// one eventLeaseBucket, granted for eventLeaseTTL: events expire about an
// hour after they were written, a bucket at a time, and the compactor
// removes them from history. After each create the writer counts the
// cluster's events and, past state.DefaultEventMax and eventTrimSlack,
// deletes those state.Evict chooses beyond state.DefaultEventMax.
const (
	eventLeaseBucket = 10 * time.Minute
	eventLeaseTTL    = state.DefaultEventMaxAge + eventLeaseBucket
	// maxEventTrim bounds the deletes of one trim transaction (etcd's
	// default --max-txn-ops is 128).
	maxEventTrim = 100
	// eventTrimSlack is how far past state.DefaultEventMax the log may
	// grow before a writer trims it back: one full read of the log per
	// this many creates, not per create (a flood of events made every
	// create read the whole log, so writes fell behind and the writer's
	// queue dropped events). Lists show the DefaultEventMax a trim keeps.
	eventTrimSlack = state.DefaultEventMax / 10
)

// eventLog is the shared event log (state.EventLog, state.EventWatcher):
// the keys under <prefix>/events/ and the lease of the current bucket.
type eventLog struct {
	c     *conn
	keys  keys
	skip  *skipLog
	clock func() time.Time

	mu     sync.Mutex // guards the fields below: the current bucket's lease
	bucket time.Time
	lease  clientv3.LeaseID
}

func (k keys) events(clusterID string) string { return k.prefix + "/events/" + clusterID + "/" }

// AppendEvent implements state.EventLog.
func (g *eventLog) AppendEvent(ctx context.Context, ev state.NodeEvent) (bool, error) {
	if err := state.ValidateEvent(ev); err != nil {
		return false, err
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "append event")
	if err != nil {
		return false, err
	}
	defer cancel()
	val, err := json.Marshal(ev)
	if err != nil {
		return false, err
	}
	key := g.keys.events(ev.ClusterID) + ev.ID
	var resp *clientv3.TxnResponse
	for attempt := 0; ; attempt++ {
		var lease clientv3.LeaseID
		if lease, err = g.eventLeaseFor(ctx, attempt > 0); err == nil {
			resp, err = g.c.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).
				Commit()
		}
		if attempt == 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			continue // the bucket's lease expired or was revoked: grant another
		}
		break
	}
	if err != nil {
		return false, g.c.mapError("append event", err, ci)
	}
	if !resp.Succeeded {
		return false, nil
	}
	if err := g.trimEvents(ctx, ev.ClusterID); err != nil {
		return true, g.c.mapError("trim events", err, ci)
	}
	return true, nil
}

// eventLeaseFor returns the lease of the current bucket, granting it on
// the bucket's first event (or when renew: the lease was not found).
func (g *eventLog) eventLeaseFor(ctx context.Context, renew bool) (clientv3.LeaseID, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	bucket := g.clock().Truncate(eventLeaseBucket)
	if !renew && g.lease != 0 && g.bucket.Equal(bucket) {
		return g.lease, nil
	}
	resp, err := g.c.client.Grant(ctx, int64(eventLeaseTTL/time.Second))
	if err != nil {
		return 0, err
	}
	g.bucket, g.lease = bucket, resp.ID
	return g.lease, nil
}

// trimEvents deletes the events beyond state.DefaultEventMax that
// state.Evict chooses (a source over its quota first, operator and
// security events last). Another writer may trim at the same time: a
// delete of a deleted key is no error.
func (g *eventLog) trimEvents(ctx context.Context, clusterID string) error {
	prefix := g.keys.events(clusterID)
	count, err := g.c.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || count.Count <= state.DefaultEventMax+eventTrimSlack {
		return err
	}
	all, err := g.readEvents(ctx, clusterID)
	if err != nil {
		return err
	}
	excess := state.Evict(all, state.DefaultEventMax)
	for len(excess) > 0 {
		n := min(len(excess), maxEventTrim)
		ops := make([]clientv3.Op, 0, n)
		for _, e := range excess[:n] {
			ops = append(ops, clientv3.OpDelete(prefix+e.ID))
		}
		if _, err := g.c.client.Txn(ctx).Then(ops...).Commit(); err != nil {
			return err
		}
		excess = excess[n:]
	}
	return nil
}

// readEvents returns every event of the cluster, oldest first, skipping
// values it cannot decode.
func (g *eventLog) readEvents(ctx context.Context, clusterID string) ([]state.NodeEvent, error) {
	resp, err := g.c.client.Get(ctx, g.keys.events(clusterID), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]state.NodeEvent, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var e state.NodeEvent
		if err := json.Unmarshal(kv.Value, &e); err != nil || e.ID == "" {
			g.skip.skipped(string(kv.Key), fmt.Errorf("%w: not an event (%v)", cluster.ErrMalformed, err))
			continue
		}
		out = append(out, e)
	}
	state.SortEvents(out)
	return out, nil
}

// ListEvents implements state.EventLog.
func (g *eventLog) ListEvents(ctx context.Context, clusterID string, since time.Time, limit int) ([]state.NodeEvent, error) {
	ctx, cancel, ci, err := g.c.begin(ctx, "list events")
	if err != nil {
		return nil, err
	}
	defer cancel()
	all, err := g.readEvents(ctx, clusterID)
	if err != nil {
		return nil, g.c.mapError("list events", err, ci)
	}
	if floor := g.clock().Add(-state.DefaultEventMaxAge); since.Before(floor) {
		since = floor
	}
	// A writer trims after its creates; until then the log may hold more
	// than the bound, and the list shows what the next trim keeps.
	return state.TrimEvents(state.KeepEvents(all, state.DefaultEventMax), since, limit), nil
}

var (
	_ state.EventLog = (*Store)(nil)
	_ state.EventLog = (*eventLog)(nil)
)

// WatchEvents implements state.EventWatcher: a watch of the cluster's
// event prefix from the current revision, puts only.
func (g *eventLog) WatchEvents(ctx context.Context, clusterID string) <-chan state.NodeEvent {
	out := make(chan state.NodeEvent, 64)
	go func() {
		defer close(out)
		ch, wctx, cancel := g.c.watch(ctx, g.keys.events(clusterID))
		defer cancel()
		for resp := range ch {
			if resp.Err() != nil {
				return
			}
			for _, wev := range resp.Events {
				var e state.NodeEvent
				if err := json.Unmarshal(wev.Kv.Value, &e); err != nil || e.ID == "" || e.ClusterID != clusterID {
					g.skip.skipped(string(wev.Kv.Key), fmt.Errorf("%w: not an event (%v)", cluster.ErrMalformed, err))
					continue
				}
				select {
				case out <- e:
				case <-wctx.Done():
					return
				}
			}
		}
	}()
	return out
}

var _ state.EventWatcher = (*Store)(nil)
