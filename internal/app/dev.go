package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/devcluster"
	"github.com/talonhq/talon/internal/state"
)

var errDevUnavailable = errors.New("talon dev is not available in this build")

func newDevCmd(env Env) *cobra.Command {
	opts := devcluster.Options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local development cluster: coordinators and workers on loopback, memory backend",
		Long: `dev runs a coordinator (--coordinators N: several, active-active over one
memory store) and workers (three by default) in one process, on loopback
addresses, with the embedded memory state backend, and prints the addresses
to use: the admin URLs (UI, /api/v1, /metrics) and the control addresses. It
runs until interrupted (Ctrl-C). The first coordinator listens on 7400
(control) and 7401 (admin), the next on 7402 and 7403, and so on; a port
that is taken is replaced by a random one, with a warning.

With several coordinators, kill -USR1 PID stops the first one running
(coordinator-1 first, the one talonctl and top ask first; the banner names
the PID): talonctl top and the web UI fail over to the others, its record
expires within the lease TTL, and coordinators list reports it missing;
kill -USR2 PID starts it again as a new incarnation on the same addresses.

The control and data ports use mutual TLS like production: dev creates a
throwaway CA and a certificate per process in <dir>/tls. Clients pick them up
with --dir (talon get --dir DIR, talon bench lookups --dir DIR), and a worker
started separately joins with talon worker --dev-dir DIR. The admin listeners
stay plain HTTP on loopback and require a bearer token: dev generates one
with every scope (reads, cordons and jobs, scrapes, debug), prints it, writes it to
<dir>/admin-token and writes a talonctl configuration file of its own,
<dir>/talonctl.yaml, whose current context "dev" names every coordinator and
the token (export TALONCTL_CONFIG=<dir>/talonctl.yaml, as the banner says).
--admin-auth=false runs without a token: reads are open, writes refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env.Runners.Dev == nil {
				return errDevUnavailable
			}
			if err := opts.Validate(); err != nil {
				return &usageError{err}
			}
			log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			return env.Runners.Dev(cmd.Context(), opts, cmd.OutOrStdout(), log)
		},
	}
	cmd.Flags().IntVar(&opts.Workers, "workers", 3, "number of workers")
	cmd.Flags().IntVar(&opts.Coordinators, "coordinators", 1, fmt.Sprintf("number of coordinators, active-active over the one memory store (1 to %d); with several, kill -USR1 stops one and kill -USR2 starts it again", devcluster.MaxCoordinators))
	cmd.Flags().StringVar(&opts.BaseDir, "dir", "", "directory for blobs and caches (default: a temporary directory)")
	cmd.Flags().BoolVar(&opts.DemoLoad, "demo-load", false, "generate light background reads so the views show traffic")
	cmd.Flags().StringVar(&opts.ListenHost, "host", "127.0.0.1", "loopback host to bind (127.0.0.0/8, ::1 or localhost; any other needs --allow-non-loopback)")
	cmd.Flags().BoolVar(&opts.AllowNonLoopback, "allow-non-loopback", false, "let --host be an address other hosts reach; they can then use the admin listeners (keep --admin-auth)")
	cmd.Flags().BoolVar(&opts.AdminAuth, "admin-auth", true, "require a bearer token on the admin listeners: one with every scope is generated, printed and written to <dir>/admin-token and the talonctl context <dir>/talonctl.yaml; --admin-auth=false leaves reads open and refuses every write")
	cmd.Flags().StringVar(&opts.BlobStore, "blob-store", "", "the workers' blob store URL, such as s3://bucket/prefix?endpoint=..., gs://bucket/prefix or az://account/container/prefix (default: the sample objects in <dir>/blobs)")
	return cmd
}

// runDev runs `talon dev` (package devcluster) with this package's wiring
// of the two roles.
func runDev(ctx context.Context, opts devcluster.Options, stdout io.Writer, log *slog.Logger) error {
	return devcluster.Run(ctx, opts, devRoles(), stdout, log)
}

// devRoles builds a dev cluster's processes as standalone ones are built;
// the coordinator serves the embedded UI.
func devRoles() devcluster.Roles {
	return devcluster.Roles{
		Coordinator: func(ctx context.Context, cfg *config.Config, store state.Store, log *slog.Logger) (devcluster.Coordinator, error) {
			p, err := NewCoordinator(ctx, cfg, store, uiHandler(cfg), log)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		Worker: func(cfg *config.Config, log *slog.Logger) (devcluster.Worker, error) {
			p, err := NewWorker(cfg, log)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
	}
}
