package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/state/memory"
)

// Roles opens stores and builds coordinators from configuration as a talon
// process does; package app supplies it.
type Roles struct {
	// OpenStore connects to cfg's state backend.
	OpenStore func(ctx context.Context, cfg *config.Config, log *slog.Logger) (state.Store, error)
	// Coordinator builds a coordinator process on store, which it does
	// not close.
	Coordinator func(ctx context.Context, cfg *config.Config, store state.Store, log *slog.Logger) (Coordinator, error)
}

// Coordinator is a built coordinator process.
type Coordinator interface {
	Coordinator() *coordinator.Coordinator
	// Run serves until ctx ends and drains.
	Run(ctx context.Context) error
}

// openStore opens a store of cfg's backend: memory in this process, else
// as a coordinator process would.
func (r Roles) openStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (state.Store, error) {
	if cfg.StateBackend == config.BackendMemory {
		return memory.New(memory.Options{Logger: log}), nil
	}
	return r.OpenStore(ctx, cfg, log)
}

// coordinators are coordinators run in this process for a benchmark, each
// on its own store, as separate processes would be.
type coordinators struct {
	procs  []*coordinator.Coordinator
	stores []state.Store
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// startCoordinators builds and runs a coordinator for each configuration
// and waits until all are ready; Stop ends them. Coordinator i runs on
// stores[i] when given, else on a store opened from its configuration;
// either way Stop closes it.
func startCoordinators(ctx context.Context, roles Roles, cfgs []*config.Config, stores []state.Store, log *slog.Logger) (*coordinators, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	bc := &coordinators{cancel: cancel, errs: make(chan error, len(cfgs))}
	for i, cfg := range cfgs {
		var s state.Store
		if i < len(stores) {
			s = stores[i]
		}
		if s == nil {
			var err error
			if s, err = roles.openStore(ctx, cfg, log); err != nil {
				bc.Stop()
				return nil, fmt.Errorf("coordinator %s: state backend %s: %w", cfg.NodeID, cfg.StateBackend, err)
			}
		}
		bc.stores = append(bc.stores, s)
		p, err := roles.Coordinator(ctx, cfg, s, log)
		if err != nil {
			bc.Stop()
			return nil, fmt.Errorf("coordinator %s: %w", cfg.NodeID, err)
		}
		bc.procs = append(bc.procs, p.Coordinator())
		bc.wg.Go(func() {
			if err := p.Run(runCtx); err != nil {
				bc.errs <- fmt.Errorf("coordinator %s: %w", cfg.NodeID, err)
			}
		})
	}
	if err := bc.waitReady(ctx); err != nil {
		bc.Stop()
		return nil, err
	}
	return bc, nil
}

// waitReady waits up to a minute until every coordinator is ready.
func (bc *coordinators) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for _, c := range bc.procs {
		for !c.Readiness().Ready {
			select {
			case err := <-bc.errs:
				return err
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				r := c.Readiness()
				return fmt.Errorf("coordinator %s not ready after a minute: %s", c.NodeID(), strings.Join(r.Reasons, "; "))
			}
		}
	}
	return nil
}

// Addrs returns the coordinators' control addresses.
func (bc *coordinators) Addrs() []string {
	var out []string
	for _, c := range bc.procs {
		out = append(out, c.Addr().String())
	}
	return out
}

// leaseGrants sums the etcd leases the coordinators' stores granted.
func (bc *coordinators) leaseGrants() int {
	n := 0
	for _, s := range bc.stores {
		if st, ok := s.(interface{ Stats() etcd.Stats }); ok {
			n += int(st.Stats().LeaseGrants)
		}
	}
	return n
}

// renewals sums the heartbeats the coordinators' stores answered with a
// lease renewal only (etcd and Kubernetes; the memory store counts none).
func (bc *coordinators) renewals() uint64 {
	var n uint64
	for _, s := range bc.stores {
		switch st := s.(type) {
		case interface{ Stats() etcd.Stats }:
			n += st.Stats().Renewals
		case interface{ Stats() kube.Stats }:
			n += st.Stats().Renewals
		}
	}
	return n
}

// Stop ends the coordinators (each drains and removes its own record),
// closes their stores and returns the first error one of them reported.
func (bc *coordinators) Stop() error {
	bc.cancel()
	bc.wg.Wait()
	for _, s := range bc.stores {
		s.Close()
	}
	close(bc.errs)
	var errs []error
	for err := range bc.errs {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
