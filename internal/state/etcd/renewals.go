package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// RenewalsSince implements state.RenewalLog: one read of the batches
// modified after after, skipping from's own and any value it cannot
// decode.
func (s *Store) RenewalsSince(ctx context.Context, clusterID, from string, after state.Revision) ([]state.Renewal, state.Revision, error) {
	ctx, cancel, ci, err := s.begin(ctx, "read renewals")
	if err != nil {
		return nil, state.Revision{}, err
	}
	defer cancel()
	prefix := s.keys.renewals(clusterID)
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if !after.IsZero() {
		rev, perr := strconv.ParseInt(after.String(), 10, 64)
		if perr != nil {
			return nil, state.Revision{}, fmt.Errorf("etcd read renewals: revision %q: %w", after, perr)
		}
		opts = append(opts, clientv3.WithMinModRev(rev+1))
	}
	resp, err := s.client.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, state.Revision{}, s.mapError("read renewals", err, ci)
	}
	var out []state.Renewal
	for _, kv := range resp.Kvs {
		if strings.TrimPrefix(string(kv.Key), prefix) == from {
			continue
		}
		batch, err := state.DecodeRenewals(kv.Value)
		if err != nil {
			s.skipped(string(kv.Key), err)
			continue
		}
		out = append(out, batch...)
	}
	return out, revision(resp.Header.Revision), nil
}

var _ state.RenewalLog = (*Store)(nil)
