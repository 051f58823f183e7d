package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Persisted cordons (state.CordonLog) are keys
// <prefix>/cordons/<cluster-id>/<role>/<node-id> without a lease, outside
// <prefix>/clusters/ so that no reader of the records sees them. Uncordon
// deletes the key.
func (k keys) cordons(clusterID string) string { return k.prefix + "/cordons/" + clusterID + "/" }

func (k keys) cordon(key cluster.Key) string {
	return k.cordons(key.ClusterID) + string(key.Role) + "/" + key.NodeID
}

// PersistCordon implements state.CordonLog: a put, refused when the key is
// new and the cluster already keeps state.MaxPersistedCordons.
func (s *Store) PersistCordon(ctx context.Context, key cluster.Key, c state.Cordon) error {
	if err := state.ValidateCordon(key, c); err != nil {
		return fmt.Errorf("etcd persist cordon: %w", err)
	}
	val, err := state.EncodeCordon(c)
	if err != nil {
		return err
	}
	ctx, cancel, ci, err := s.begin(ctx, "persist cordon")
	if err != nil {
		return err
	}
	defer cancel()
	k := s.keys.cordon(key)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Else(clientv3.OpGet(s.keys.cordons(key.ClusterID), clientv3.WithPrefix(), clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return s.mapError("persist cordon", err, ci)
	}
	if resp.Succeeded {
		return nil // replaced
	}
	if n := resp.Responses[0].GetResponseRange().Count; n >= state.MaxPersistedCordons {
		return fmt.Errorf("etcd persist cordon of %q: %w", key.NodeID, state.ErrTooManyCordons)
	}
	if _, err := s.client.Put(ctx, k, string(val)); err != nil {
		return s.mapError("persist cordon", err, ci)
	}
	return nil
}

// LiftCordon implements state.CordonLog.
func (s *Store) LiftCordon(ctx context.Context, key cluster.Key) error {
	if err := state.ValidateKey(key); err != nil {
		return fmt.Errorf("etcd lift cordon: %w", err)
	}
	ctx, cancel, ci, err := s.begin(ctx, "lift cordon")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := s.client.Delete(ctx, s.keys.cordon(key)); err != nil {
		return s.mapError("lift cordon", err, ci)
	}
	return nil
}

// PersistedCordon implements state.CordonLog: one linearizable read.
func (s *Store) PersistedCordon(ctx context.Context, key cluster.Key) (state.Cordon, bool, error) {
	if err := state.ValidateKey(key); err != nil {
		return state.Cordon{}, false, fmt.Errorf("etcd read cordon: %w", err)
	}
	ctx, cancel, ci, err := s.begin(ctx, "read cordon")
	if err != nil {
		return state.Cordon{}, false, err
	}
	defer cancel()
	resp, err := s.client.Get(ctx, s.keys.cordon(key))
	if err != nil {
		return state.Cordon{}, false, s.mapError("read cordon", err, ci)
	}
	if len(resp.Kvs) == 0 {
		return state.Cordon{}, false, nil
	}
	c, err := state.DecodeCordon(key, resp.Kvs[0].Value)
	if err != nil {
		s.skipped(string(resp.Kvs[0].Key), err)
		return state.Cordon{}, false, nil
	}
	return c, true, nil
}

var _ state.CordonLog = (*Store)(nil)
