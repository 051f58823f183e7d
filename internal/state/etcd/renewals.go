package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// The renewal log (state.RenewalLog) is one key per publishing
// coordinator, <prefix>/renewals/<cluster-id>/<coordinator-id>, outside
// <prefix>/clusters/ so that it never wakes the records' watches. Each
// publication replaces the key's value with the batch (a put, one
// revision); the key is attached to a lease of the publisher's keepFor,
// granted again every half of it, so a coordinator that stops publishing
// leaves nothing behind after keepFor, and the compactor removes the old
// values from history.
func (k keys) renewals(clusterID string) string { return k.prefix + "/renewals/" + clusterID + "/" }

// renewalLog is the renewal log (state.RenewalLog): the keys under
// <prefix>/renewals/ and the lease of this store's publications.
type renewalLog struct {
	c     *conn
	keys  keys
	skip  *skipLog
	clock func() time.Time
	stats *statsCounters // grants and renewalBytes

	mu      sync.Mutex // guards the fields below: the publications' lease
	lease   clientv3.LeaseID
	granted time.Time
	ttl     time.Duration
}

// PublishRenewals implements state.RenewalLog.
func (g *renewalLog) PublishRenewals(ctx context.Context, clusterID, from string, batch []state.Renewal, keepFor time.Duration) error {
	if err := cluster.ValidateID("coordinator", from); err != nil {
		return fmt.Errorf("etcd publish renewals: %w", err)
	}
	val, err := state.EncodeRenewals(batch)
	if err != nil {
		return fmt.Errorf("etcd publish renewals: %w", err)
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "publish renewals")
	if err != nil {
		return err
	}
	defer cancel()
	key := g.keys.renewals(clusterID) + from
	for attempt := 0; ; attempt++ {
		var lease clientv3.LeaseID
		if lease, err = g.renewalLeaseFor(ctx, keepFor, attempt > 0); err == nil {
			_, err = g.c.client.Put(ctx, key, string(val), clientv3.WithLease(lease))
		}
		if attempt == 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			continue // expired while this store was away: grant another
		}
		break
	}
	if err != nil {
		return g.c.mapError("publish renewals", err, ci)
	}
	g.stats.renewalBytes.Add(uint64(len(val)))
	return nil
}

// renewalLeaseFor returns the publications' lease, granting one when
// there is none, it is half spent, keepFor changed, or renew (not found).
func (g *renewalLog) renewalLeaseFor(ctx context.Context, keepFor time.Duration, renew bool) (clientv3.LeaseID, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	keepFor = max(keepFor.Truncate(time.Second), 2*time.Second)
	now := g.clock()
	if !renew && g.lease != 0 && g.ttl == keepFor && now.Sub(g.granted) < keepFor/2 {
		return g.lease, nil
	}
	g.stats.grants.Add(1)
	resp, err := g.c.client.Grant(ctx, int64(keepFor/time.Second))
	if err != nil {
		return 0, err
	}
	g.lease, g.granted, g.ttl = resp.ID, now, keepFor
	return g.lease, nil
}

// WatchRenewals implements state.RenewalLog: a watch of the cluster's
// renewal prefix from the current revision, puts only, skipping from's
// key and any value it cannot decode. Nothing is requested while no peer
// publishes: the watch costs a stream, not a poll.
func (g *renewalLog) WatchRenewals(ctx context.Context, clusterID, from string) <-chan []state.Renewal {
	out := make(chan []state.Renewal, 16)
	prefix := g.keys.renewals(clusterID)
	go func() {
		defer close(out)
		ch, wctx, cancel := g.c.watch(ctx, prefix)
		defer cancel()
		for resp := range ch {
			if resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events {
				if strings.TrimPrefix(string(ev.Kv.Key), prefix) == from {
					continue
				}
				batch, err := state.DecodeRenewals(ev.Kv.Value)
				if err != nil {
					g.skip.skipped(string(ev.Kv.Key), err)
					continue
				}
				select {
				case out <- batch:
				case <-wctx.Done():
					return
				}
			}
		}
	}()
	return out
}

var (
	_ state.RenewalLog = (*Store)(nil)
	_ state.RenewalLog = (*renewalLog)(nil)
)
