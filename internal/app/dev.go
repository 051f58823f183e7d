package app

import (
	"log/slog"

	"github.com/spf13/cobra"
)

// DevOptions configures `talon dev`.
type DevOptions struct {
	Workers  int
	BaseDir  string
	DemoLoad bool
	// ListenHost is the loopback host every process binds.
	ListenHost string
	// AdminAuth requires a generated bearer token on the admin listeners
	// (written to <dir>/admin-token).
	AdminAuth bool
}

func newDevCmd(env Env) *cobra.Command {
	opts := DevOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local development cluster: one coordinator and workers on loopback, memory backend",
		Long: `dev runs a coordinator and workers (three by default) in one process, on
loopback addresses, with the embedded memory state backend, and prints the
addresses to use: the admin URL (UI, /api/v1, /metrics) and the control
address. It runs until interrupted (Ctrl-C).

The control and data ports use mutual TLS like production: dev creates a
throwaway CA and a certificate per process in <dir>/tls. Clients pick them up
with --dir (talon get --dir DIR, talon bench lookups --dir DIR), and a worker
started separately joins with talon worker --dev-dir DIR. The admin listeners
stay plain HTTP on loopback, without a token unless --admin-auth.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env.Runners.Dev == nil {
				return errDevUnavailable
			}
			log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			return env.Runners.Dev(cmd.Context(), opts, cmd.OutOrStdout(), log)
		},
	}
	cmd.Flags().IntVar(&opts.Workers, "workers", 3, "number of workers")
	cmd.Flags().StringVar(&opts.BaseDir, "dir", "", "directory for blobs and caches (default: a temporary directory)")
	cmd.Flags().BoolVar(&opts.DemoLoad, "demo-load", false, "generate light background reads so the views show traffic")
	cmd.Flags().StringVar(&opts.ListenHost, "host", "127.0.0.1", "loopback host to bind")
	cmd.Flags().BoolVar(&opts.AdminAuth, "admin-auth", false, "require a bearer token on the admin listeners; it is generated and written to <dir>/admin-token")
	return cmd
}
