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

// cordonLog is the persisted cordons (state.CordonLog): the keys under
// <prefix>/cordons/.
type cordonLog struct {
	c    *conn
	keys keys
	skip *skipLog
}

// PersistCordon implements state.CordonLog: a put, refused when the key is
// new and the cluster already keeps state.MaxPersistedCordons.
func (g *cordonLog) PersistCordon(ctx context.Context, key cluster.Key, c state.Cordon) error {
	if err := state.ValidateCordon(key, c); err != nil {
		return fmt.Errorf("etcd persist cordon: %w", err)
	}
	val, err := state.EncodeCordon(c)
	if err != nil {
		return err
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "persist cordon")
	if err != nil {
		return err
	}
	defer cancel()
	k := g.keys.cordon(key)
	resp, err := g.c.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Else(clientv3.OpGet(g.keys.cordons(key.ClusterID), clientv3.WithPrefix(), clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return g.c.mapError("persist cordon", err, ci)
	}
	if resp.Succeeded {
		return nil // replaced
	}
	if n := resp.Responses[0].GetResponseRange().Count; n >= state.MaxPersistedCordons {
		return fmt.Errorf("etcd persist cordon of %q: %w", key.NodeID, state.ErrTooManyCordons)
	}
	if _, err := g.c.client.Put(ctx, k, string(val)); err != nil {
		return g.c.mapError("persist cordon", err, ci)
	}
	return nil
}

// LiftCordon implements state.CordonLog.
func (g *cordonLog) LiftCordon(ctx context.Context, key cluster.Key) error {
	if err := state.ValidateKey(key); err != nil {
		return fmt.Errorf("etcd lift cordon: %w", err)
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "lift cordon")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := g.c.client.Delete(ctx, g.keys.cordon(key)); err != nil {
		return g.c.mapError("lift cordon", err, ci)
	}
	return nil
}

// PersistedCordon implements state.CordonLog: one linearizable read.
func (g *cordonLog) PersistedCordon(ctx context.Context, key cluster.Key) (state.Cordon, bool, error) {
	if err := state.ValidateKey(key); err != nil {
		return state.Cordon{}, false, fmt.Errorf("etcd read cordon: %w", err)
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "read cordon")
	if err != nil {
		return state.Cordon{}, false, err
	}
	defer cancel()
	resp, err := g.c.client.Get(ctx, g.keys.cordon(key))
	if err != nil {
		return state.Cordon{}, false, g.c.mapError("read cordon", err, ci)
	}
	if len(resp.Kvs) == 0 {
		return state.Cordon{}, false, nil
	}
	c, err := state.DecodeCordon(key, resp.Kvs[0].Value)
	if err != nil {
		g.skip.skipped(string(resp.Kvs[0].Key), err)
		return state.Cordon{}, false, nil
	}
	return c, true, nil
}

var (
	_ state.CordonLog = (*Store)(nil)
	_ state.CordonLog = (*cordonLog)(nil)
)
