package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/devcluster"
	"github.com/talonhq/talon/internal/tracing"
	"github.com/talonhq/talon/internal/tracing/otlp"
)

// Exit codes of the talon daemon.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Env is what the commands take from the process: streams and environment.
type Env struct {
	Stdout  io.Writer
	Stderr  io.Writer
	Environ []string
	// Runners start the long-running roles; tests replace them.
	Runners Runners
}

// Runners run the two roles and the development cluster until ctx ends.
type Runners struct {
	Coordinator func(ctx context.Context, cfg *config.Config, log *slog.Logger) error
	Worker      func(ctx context.Context, cfg *config.Config, log *slog.Logger) error
	Dev         func(ctx context.Context, opts devcluster.Options, stdout io.Writer, log *slog.Logger) error
}

// isCobraUsage reports whether err is cobra's own complaint about the
// command line: a wrong number of arguments or an unknown command.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"accepts ", "requires at least ", "requires at most ", "requires exactly ", "unknown command ", "invalid argument "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// usageError marks errors that are the caller's fault (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// Main runs the talon command with args and returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	root := NewRootCmd(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(env.Stderr, "talon: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		// One convention with talonctl: exit 2 and a pointer to help.
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(env.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return ExitUsage
	}
	return ExitError
}

// NewRootCmd builds the talon command tree.
func NewRootCmd(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "talon",
		Short: "Talon distributed block cache: coordinator and worker daemon",
		Long: `talon runs the processes of a Talon cluster.

Coordinators serve worker registration, heartbeats and placement lookups,
active-active behind one service address, with cluster state in a shared
store (memory for development, etcd or Kubernetes Leases in production).
Workers cache blocks of objects from a blob store and serve them.

Every setting can come from a flag (--NAME), the environment (TALON_NAME,
upper case, '-' as '_') or a YAML config file (--config, key NAME), in that
order of precedence over the built-in defaults. Secrets come only from the
environment or from files.

Tracing is off unless the standard OpenTelemetry environment turns it on:
OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) exports spans of
control requests, store operations, heartbeats and blob fetches over OTLP
(OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf or grpc); OTEL_TRACES_SAMPLER,
OTEL_SERVICE_NAME and the exporter's other OTEL_* settings apply.

Memory: in a container (a cgroup) with a memory limit, coordinators and
workers set Go's soft memory limit to 90% of it, so the heap is collected
harder near the limit instead of growing to twice the live heap. GOMEMLIMIT
sets the soft limit instead; AUTOMEMLIMIT=off turns the default off and
AUTOMEMLIMIT=0.8 (above 0, at most 1) picks another share.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(
		newRoleCmd(env, cluster.RoleCoordinator),
		newRoleCmd(env, cluster.RoleWorker),
		newDevCmd(env),
		newPKICmd(env),
		newGetCmd(env),
		newBenchCmd(env),
		newConfigCmd(env),
		newVersionCmd(env),
		newProbeCmd(env),
		newCtlCmd(),
	)
	return root
}

func newVersionCmd(env Env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return &usageError{fmt.Errorf("--output %q: must be text or json", output)}
			}
			return buildinfo.Get().Write(cmd.OutOrStdout(), "talon", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// loadConfig loads the role's configuration from cmd's flags, the
// environment and the config file.
func loadConfig(cmd *cobra.Command, env Env, role cluster.Role) (*config.Loaded, error) {
	return config.Load(role, config.Options{
		ConfigFile: config.FileFromFlags(cmd.Flags()),
		Environ:    env.Environ,
		Flags:      cmd.Flags(),
	})
}

func newRoleCmd(env Env, role cluster.Role) *cobra.Command {
	short := map[cluster.Role]string{
		cluster.RoleCoordinator: "Run a coordinator: registration, heartbeats, placement, admin API and UI",
		cluster.RoleWorker:      "Run a worker: cache blocks from the blob store and serve them",
	}[role]
	cmd := &cobra.Command{
		Use:   string(role),
		Short: short,
		Long:  short + ".\n\n" + skewHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, err := loadConfig(cmd, env, role)
			if err != nil {
				return &usageError{err}
			}
			if _, err := otlp.Decide(getenvFrom(env.Environ)); err != nil {
				return &usageError{err}
			}
			log := NewLogger(env.Stderr, loaded.Config)
			run := env.Runners.Coordinator
			if role == cluster.RoleWorker {
				run = env.Runners.Worker
			}
			if run == nil {
				return fmt.Errorf("the %s runtime is not part of this build", role)
			}
			return run(cmd.Context(), loaded.Config, log)
		},
	}
	config.RegisterFlags(cmd.Flags(), role)
	return cmd
}

// skewHelp is the upgrade and version-skew paragraph of the coordinator
// and worker commands' help (and man pages).
var skewHelp = fmt.Sprintf(`Upgrades and version skew: this build speaks protocol feature level %d.
Every process writes its level into its record; the cluster's feature level is
the lowest among live processes, and behaviour that an older process would
misread waits for it (at level 0, every heartbeat writes the whole record and
cordons are refused). Processes may run together when their levels differ by
at most %d: coordinators of release N and N-1, workers one level either side of
them. A coordinator refuses to start beside a live process outside that policy,
and refuses such a worker's registration, before writing anything, naming both
versions. Upgrade one release at a time, coordinators first, one at a time,
each ready before the next; then the workers (workers first works too). Roll
back in the reverse order. talonctl version shows every process's version and
the cluster's level; see docs/operations.md, "Upgrades and version skew".`, cluster.BuildLevel, cluster.MaxLevelSkew)

func newConfigCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print or validate the effective configuration",
	}
	for _, verb := range []string{"print", "validate"} {
		verb := verb
		sub := &cobra.Command{
			Use:       verb + " [coordinator|worker]",
			Short:     map[string]string{"print": "Print the effective configuration with the source of each value (secrets redacted)", "validate": "Validate the configuration and exit non-zero naming the first problem"}[verb],
			Args:      cobra.MaximumNArgs(1),
			ValidArgs: []string{"coordinator", "worker"},
			// Flags of both roles are accepted; the role's own are applied.
			FParseErrWhitelist: cobra.FParseErrWhitelist{},
			RunE: func(cmd *cobra.Command, args []string) error {
				role := cluster.RoleCoordinator
				if len(args) == 1 {
					r, err := cluster.ParseRole(args[0])
					if err != nil {
						return &usageError{err}
					}
					role = r
				}
				if verb == "print" {
					return printConfig(cmd, env, role)
				}
				loaded, err := loadConfig(cmd, env, role)
				if err != nil {
					return &usageError{err}
				}
				if verb == "validate" {
					// The checks start-up makes before the network:
					// TLS material loaded and matched, the blob store.
					if err := preflight(loaded.Config); err != nil {
						return err
					}
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s configuration is valid\n", role)
					return err
				}
				return loaded.Print(cmd.OutOrStdout())
			},
		}
		config.RegisterAllFlags(sub.Flags())
		cmd.AddCommand(sub)
	}
	return cmd
}

// printConfig prints the effective configuration, valid or not: an invalid
// one is printed with each problem marked beside the settings it names,
// and the command then exits non-zero (usage error) naming the count.
func printConfig(cmd *cobra.Command, env Env, role cluster.Role) error {
	loaded, err := config.LoadUnvalidated(role, config.Options{
		ConfigFile: config.FileFromFlags(cmd.Flags()),
		Environ:    env.Environ,
		Flags:      cmd.Flags(),
	})
	if err != nil {
		return &usageError{err}
	}
	problems := loaded.Problems()
	if err := loaded.PrintProblems(cmd.OutOrStdout(), problems); err != nil {
		return err
	}
	if len(problems) > 0 {
		return &usageError{fmt.Errorf("%w: %d problem(s), marked in the output above; the first: %w", config.ErrInvalid, len(problems), problems[0])}
	}
	return nil
}

// NewLogger returns the process logger for cfg's level and format.
func NewLogger(w io.Writer, cfg *config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
}

// DefaultEnv is the environment of the real process.
func DefaultEnv() Env {
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ(), Runners: defaultRunners()}
}
