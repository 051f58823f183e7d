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

// renewalLease is the lease of this store's publications.
type renewalLease struct {
	mu      sync.Mutex // guards the fields below
	id      clientv3.LeaseID
	granted time.Time
	ttl     time.Duration
}

// PublishRenewals implements state.RenewalLog.
func (s *Store) PublishRenewals(ctx context.Context, clusterID, from string, batch []state.Renewal, keepFor time.Duration) error {
	if err := cluster.ValidateID("coordinator", from); err != nil {
		return fmt.Errorf("etcd publish renewals: %w", err)
	}
	val, err := state.EncodeRenewals(batch)
	if err != nil {
		return fmt.Errorf("etcd publish renewals: %w", err)
	}
	ctx, cancel, ci, err := s.begin(ctx, "publish renewals")
	if err != nil {
		return err
	}
	defer cancel()
	key := s.keys.renewals(clusterID) + from
	for attempt := 0; ; attempt++ {
		var lease clientv3.LeaseID
		if lease, err = s.renewalLeaseFor(ctx, keepFor, attempt > 0); err == nil {
			_, err = s.client.Put(ctx, key, string(val), clientv3.WithLease(lease))
		}
		if attempt == 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			continue // expired while this store was away: grant another
		}
		break
	}
	if err != nil {
		return s.mapError("publish renewals", err, ci)
	}
	s.stats.renewalBytes.Add(uint64(len(val)))
	return nil
}

// renewalLeaseFor returns the publications' lease, granting one when
// there is none, it is half spent, keepFor changed, or renew (not found).
func (s *Store) renewalLeaseFor(ctx context.Context, keepFor time.Duration, renew bool) (clientv3.LeaseID, error) {
	l := &s.renewalLease
	l.mu.Lock()
	defer l.mu.Unlock()
	keepFor = max(keepFor.Truncate(time.Second), 2*time.Second)
	now := s.clock()
	if !renew && l.id != 0 && l.ttl == keepFor && now.Sub(l.granted) < keepFor/2 {
		return l.id, nil
	}
	s.stats.grants.Add(1)
	resp, err := s.client.Grant(ctx, int64(keepFor/time.Second))
	if err != nil {
		return 0, err
	}
	l.id, l.granted, l.ttl = resp.ID, now, keepFor
	return l.id, nil
}

// WatchRenewals implements state.RenewalLog: a watch of the cluster's
// renewal prefix from the current revision, puts only, skipping from's
// key and any value it cannot decode. Nothing is requested while no peer
// publishes: the watch costs a stream, not a poll.
func (s *Store) WatchRenewals(ctx context.Context, clusterID, from string) <-chan []state.Renewal {
	out := make(chan []state.Renewal, 16)
	prefix := s.keys.renewals(clusterID)
	go func() {
		defer close(out)
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer cancel()
		defer context.AfterFunc(s.lifetime, cancel)()
		for resp := range s.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithFilterDelete()) {
			if resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events {
				if strings.TrimPrefix(string(ev.Kv.Key), prefix) == from {
					continue
				}
				batch, err := state.DecodeRenewals(ev.Kv.Value)
				if err != nil {
					s.skipped(string(ev.Kv.Key), err)
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

var _ state.RenewalLog = (*Store)(nil)
