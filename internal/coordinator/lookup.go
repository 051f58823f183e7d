package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
)

// The placement lookup: the current view (or fail closed) and the owners
// of a key in it. A read of the store is shared by every caller waiting
// at the time (batcher, wire.go); what a read applies is in fetch.go.

// View returns a consistent view read after the call began. When the
// store cannot be read within the request timeout, Run has not started,
// or the coordinator is recovering from an outage or its own stall (see
// Options.RecoveryHold), it returns an error wrapping ErrNotReady.
func (c *Coordinator) View(ctx context.Context) (*View, error) {
	b := c.views.Load()
	if b == nil {
		return nil, fmt.Errorf("%w: the coordinator is not running yet", ErrNotReady)
	}
	// Unready answers at once: while the last read failed or recovery is
	// on, a caller gets not_ready now, not after a read that would wait
	// out the request timeout; the refresh loop keeps probing the store.
	if err := c.unready(); err != nil {
		c.refresh.request()
		return nil, err
	}
	v, err := b.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if err := c.unready(); err != nil {
		return nil, err
	}
	return v, nil
}

// unready returns the ErrNotReady a caller gets without a read: the last
// applied read failed, or the coordinator is recovering; nil otherwise.
func (c *Coordinator) unready() error {
	if r := c.view.recoveryReason(c.mono()); r != "" {
		return fmt.Errorf("%w: %s", ErrNotReady, r)
	}
	if vs := c.view.state(); vs.synced && !vs.storeOK {
		return fmt.Errorf("%w: the store did not answer the last read: %w", ErrNotReady, vs.lastErr)
	}
	if r := c.unconfirmedReason(); r != "" {
		return fmt.Errorf("%w: %s", ErrNotReady, r)
	}
	return nil
}

// unconfirmedReason says why the view is no longer known to be current:
// no read that started within the request timeout has succeeded. It is ""
// otherwise. The refresh loop starts a read at least three times per
// request timeout (refreshEvery), so a store that answers never leaves
// the view unconfirmed; one that stops answering does within one request
// timeout, before the hanging read itself fails.
func (c *Coordinator) unconfirmedReason() string {
	age, stale := c.view.unconfirmed(c.mono(), c.opts.RequestTimeout)
	if !stale {
		return ""
	}
	return fmt.Sprintf("store not answering: no read confirmed the view for %s (request timeout %s)", age.Round(time.Millisecond), c.opts.RequestTimeout)
}

// LastGood returns the last view successfully read, for diagnostics only:
// it may be stale, and callers must mark it so with its ObservedAt. It is
// nil before the first successful read.
func (c *Coordinator) LastGood() *View {
	return c.view.state().lastGood
}

// LastError returns the last store error seen, nil once the store answers again.
func (c *Coordinator) LastError() error {
	return c.view.state().lastErr
}

// current reports whether the last snapshot read succeeded: writes are
// served then, recovering or not (workers re-register during the hold).
func (c *Coordinator) current() bool {
	vs := c.view.state()
	return vs.storeOK && vs.synced
}

// Lookup answers a placement lookup from a fresh view.
func (c *Coordinator) Lookup(ctx context.Context, key string, replicas int) ([]placement.Owner, placement.Version, error) {
	start := c.now()
	c.lookups.Add(1)
	owners, version, err := c.lookup(ctx, key, replicas)
	c.m.placementDur.Observe(c.now().Sub(start).Seconds())
	if err != nil {
		c.lookupErrors.Add(1)
		c.m.placementErrs.WithLabelValues(wireCode(err).String()).Inc()
	}
	return owners, version, err
}

func (c *Coordinator) lookup(ctx context.Context, key string, replicas int) ([]placement.Owner, placement.Version, error) {
	if replicas < 1 || replicas > protocol.MaxReplicas {
		return nil, 0, protocol.NewError(protocol.CodeInvalidArgument, "replicas %d: must be from 1 to %d", replicas, protocol.MaxReplicas)
	}
	v, err := c.View(ctx)
	if err != nil {
		return nil, 0, protocol.NewError(protocol.CodeNotReady, "no current cluster view (the shared store could not be read in time, or the coordinator is recovering from an outage); retry")
	}
	owners := v.Table.Lookup(key, replicas)
	if len(owners) == 0 {
		return nil, v.Version(), protocol.NewError(protocol.CodeNoWorkers, "no healthy, ready worker in cluster %s", c.opts.ClusterID)
	}
	return owners, v.Version(), nil
}
