package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// Errors of SetCordon besides ErrNotReady and the store's.
var (
	// ErrNodeNotFound: no worker with that node ID in the current view.
	ErrNodeNotFound = errors.New("node not found")
	// ErrNotWorker: the node ID names a coordinator; only workers are
	// cordoned (a coordinator leaves service when it is stopped).
	ErrNotWorker = errors.New("only workers are cordoned")
)

// CordonRequest is an operator's cordon or uncordon of one worker,
// through this coordinator's /api/v1 (ADR 0001 section 9, amended).
type CordonRequest struct {
	NodeID string
	// On cordons; false lifts the cordon, persisted or not.
	On bool
	// Persist keeps the cordon across the worker's restarts.
	Persist bool
	// By is the operator's principal (token name or certificate
	// identity), kept in the record.
	By string
}

// CordonResult is the worker's record after SetCordon, and whether the
// call changed it (false: it already was so, and nothing was written).
type CordonResult struct {
	Record  *cluster.Record
	Changed bool
}

// cordonAttempts bounds SetCordon's rounds: a worker that restarted
// between the read and the write (a stale outcome) is read again.
const cordonAttempts = 3

// SetCordon cordons or uncordons a worker: a mark on its record in the
// shared store (state.Store.SetMarks, keeping the record's lease), so
// every coordinator leaves it out of placement at its next read, and the
// worker learns it after its next heartbeat (Instructions). Nothing is
// sent to the worker, least of all to the admin address its record
// advertises. It reads a current view first and fails closed without one
// (ErrNotReady). A cordon that is already there is not written again
// unless the request adds persist.
func (c *Coordinator) SetCordon(ctx context.Context, req CordonRequest) (CordonResult, error) {
	key := cluster.Key{ClusterID: c.opts.ClusterID, Role: cluster.RoleWorker, NodeID: req.NodeID}
	for range cordonAttempts {
		v, err := c.View(ctx)
		if err != nil {
			return CordonResult{}, err
		}
		r := v.record(key)
		if r == nil {
			if v.record(cluster.Key{ClusterID: key.ClusterID, Role: cluster.RoleCoordinator, NodeID: req.NodeID}) != nil {
				return CordonResult{}, fmt.Errorf("%w: node %q is a coordinator", ErrNotWorker, req.NodeID)
			}
			return CordonResult{}, fmt.Errorf("%w: no worker %q in cluster %q (absent, or its lease expired)", ErrNodeNotFound, req.NodeID, c.opts.ClusterID)
		}
		if !cordonChanges(r, req) {
			if !req.On {
				// Not cordoned: a persisted cordon left behind (a lift
				// that failed half-way) goes too.
				return CordonResult{Record: r}, c.cordons.lift(ctx, key)
			}
			return CordonResult{Record: r}, nil
		}
		if req.On {
			// A level-0 coordinator's next write of the record would drop
			// the mark; lifting one is always safe.
			if err := requireLevel(v, cluster.LevelRenewals, "a cordon held in the store"); err != nil {
				return CordonResult{}, err
			}
		}
		if !req.On {
			// Lifted from the log first: a failure leaves the cordon whole.
			if err := c.cordons.lift(ctx, key); err != nil {
				return CordonResult{}, err
			}
		}
		res, err := c.cordons.write(ctx, key, r, req)
		if err != nil {
			return CordonResult{}, err
		}
		switch res.Outcome {
		case state.OutcomeAccepted, state.OutcomeDuplicate:
			if err := c.cordons.persist(ctx, key, res.Record); err != nil {
				return CordonResult{}, err
			}
			c.refresh.request()
			return CordonResult{Record: res.Record, Changed: res.Outcome == state.OutcomeAccepted}, nil
		case state.OutcomeNotFound:
			return CordonResult{}, fmt.Errorf("%w: worker %q left the store before the cordon was written", ErrNodeNotFound, req.NodeID)
		}
		// Stale: another incarnation took the slot since the read.
	}
	return CordonResult{}, fmt.Errorf("%w: worker %q restarted %d times while its cordon was written; retry", ErrNotReady, req.NodeID, cordonAttempts)
}

// cordonChanges reports whether req changes r's cordon.
func cordonChanges(r *cluster.Record, req CordonRequest) bool {
	if !req.On {
		return r.Cordoned()
	}
	return !r.Cordoned() || (req.Persist && !r.CordonPersist)
}

// write writes req's mark on r's incarnation within one request
// timeout.
func (k *cordons) write(ctx context.Context, key cluster.Key, r *cluster.Record, req CordonRequest) (state.WriteResult, error) {
	m := state.MarkChange{SetCordon: true}
	if req.On {
		m.Cordon = state.Cordon{By: req.By, AtUnixMs: k.now().UnixMilli(), Persist: req.Persist || r.CordonPersist}
	}
	rctx, cancel := context.WithTimeout(ctx, k.opts.RequestTimeout)
	defer cancel()
	res, err := k.store.SetMarks(rctx, key, r.IncarnationID, m)
	if err != nil {
		k.noteStoreError("marks", 0, err)
		return state.WriteResult{}, fmt.Errorf("writing the cordon of %s: %w", req.NodeID, err)
	}
	return res, nil
}

// cordons writes the operator's cordons: the mark on a worker's record
// (write), and the store's cordon log by node (persist, lift, apply), so
// that a persisted cordon holds when the node registers again after its
// record is gone.
type cordons struct {
	*Coordinator
	persisted state.CordonLog // nil when the store keeps none
}

func newCordons(c *Coordinator) *cordons {
	log, _ := c.opts.Store.(state.CordonLog)
	return &cordons{Coordinator: c, persisted: log}
}

// persist keeps the cordon of rec, when it is a persisted one, in
// the store's cordon log by node, so that it holds when the node
// registers again after its record is gone (apply).
func (k *cordons) persist(ctx context.Context, key cluster.Key, rec *cluster.Record) error {
	log := k.persisted
	if log == nil || rec == nil || !rec.Cordoned() || !rec.CordonPersist {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, k.opts.RequestTimeout)
	defer cancel()
	if err := log.PersistCordon(rctx, key, state.Cordon{By: rec.CordonedBy, AtUnixMs: rec.CordonedAtUnixMs, Persist: true}); err != nil {
		k.noteStoreError("marks", 0, err)
		return fmt.Errorf("persisting the cordon of %s (the record is cordoned; retry to persist it): %w", key.NodeID, err)
	}
	return nil
}

// lift forgets key's persisted cordon.
func (k *cordons) lift(ctx context.Context, key cluster.Key) error {
	log := k.persisted
	if log == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, k.opts.RequestTimeout)
	defer cancel()
	if err := log.LiftCordon(rctx, key); err != nil {
		k.noteStoreError("marks", 0, err)
		return fmt.Errorf("lifting the persisted cordon of %s: %w", key.NodeID, err)
	}
	return nil
}

// apply sets on rec, a registration for a slot this
// coordinator's view holds no record in, the node's persisted cordon, in
// place of whatever cordon the process sent: the record is born cordoned,
// in the same write, so placement never lists the node between the two
// (issue 47: a worker lifted its persisted cordon by deregistering and
// registering again). A slot that holds a record keeps that record's
// cordon (cluster.Next). The cordon log failing to answer refuses the
// registration as not ready: the process retries, and the cordon is never
// skipped.
func (k *cordons) apply(ctx context.Context, rec *cluster.Record) *protocol.Error {
	log := k.persisted
	if log == nil {
		return nil
	}
	if v := k.LastGood(); v != nil && v.record(rec.Key()) != nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, k.opts.RequestTimeout)
	defer cancel()
	cd, found, err := log.PersistedCordon(rctx, rec.Key())
	if err != nil {
		k.noteStoreError("marks", 0, err)
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s could not read the persisted cordon of %s: %v; retry", k.opts.NodeID, rec.NodeID, err)
	}
	if found {
		rec.CordonedBy, rec.CordonedAtUnixMs, rec.CordonPersist = cd.By, cd.AtUnixMs, true
	}
	return nil
}
