package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/protocol"
)

// Watch subscribes to placement-version pushes from a coordinator until
// ctx ends, failing over and reconnecting as needed, and applies each
// version to the cache. onChange, if not nil, is called with each version.
func (c *Client) Watch(ctx context.Context, onChange func(uint64)) {
	retry := backoff.New(watchBackoff)
	n := len(c.opts.Coordinators)
	drained := false // the last interruption was a drain notice
	for i := 0; ctx.Err() == nil; i++ {
		addr := c.opts.Coordinators[i%n]
		began := time.Now()
		err := c.watchOne(ctx, addr, onChange)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute {
			retry.Reset() // it was healthy: start over
		}
		c.log.Debug("placement watch interrupted", "coordinator", addr, "error", err)
		if protocol.IsCode(err, protocol.CodeDraining) && !drained {
			drained = true
			continue // told to go elsewhere: the next address now (once in a row)
		}
		drained = false
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return
		}
	}
}

// watchOne subscribes at addr and applies pushes until ctx ends or the
// coordinator fails: the subscription and every probe must be answered
// within WatchProbeTimeout, and after WatchProbeInterval of silence the
// watch pings, so a coordinator that accepts but never answers (or stops
// answering) is left for the next address instead of hanging the watch.
func (c *Client) watchOne(ctx context.Context, addr string, onChange func(uint64)) error {
	dctx, cancel := context.WithTimeout(ctx, c.opts.WatchProbeTimeout)
	nc, err := c.opts.Dial(dctx, "tcp", addr)
	cancel()
	if err != nil {
		return err
	}
	apply := func(v uint64) {
		c.ObserveVersion(v)
		if onChange != nil {
			onChange(v)
		}
	}
	cn := protocol.NewConn(nc, protocol.ConnOptions{OnEpochBump: func(b protocol.EpochBump) { apply(b.Version) }})
	defer cn.Close()
	probe := func(req protocol.Message) (protocol.Message, error) {
		pctx, cancel := context.WithTimeout(ctx, c.opts.WatchProbeTimeout)
		defer cancel()
		resp, err := cn.Call(pctx, req)
		if err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("coordinator %s did not answer %s within %s: %w", addr, req.Type(), c.opts.WatchProbeTimeout, err)
		}
		return resp, err
	}
	resp, err := probe(&protocol.Subscribe{})
	if err != nil {
		return err
	}
	if b, ok := resp.(*protocol.EpochBump); ok {
		apply(b.Version)
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, c.opts.WatchProbeInterval)
		err := cn.Poll(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return err // the connection broke
		}
		if _, err := probe(&protocol.Ping{}); err != nil {
			return err
		}
	}
}
