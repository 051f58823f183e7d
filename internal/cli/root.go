// Package cli implements talonctl, the operator CLI that speaks only to the
// coordinators' /api/v1. Commands follow the noun/verb shape and the cli/cli
// pattern: an options struct per command, NewCmdX(f, runF), a private xRun.
//
// Layout: cmdutil holds the Factory, IOStreams, connection resolution, exit
// codes and output helpers shared by every command (import it, not this
// package, from a command package); cliconfig the configuration file; one
// package per noun (cluster, nodes, placement, config) with one package per
// verb below it; top, version and completion at the top.
package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/auth"
	"github.com/talonhq/talon/internal/cli/cluster"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/completion"
	"github.com/talonhq/talon/internal/cli/config"
	"github.com/talonhq/talon/internal/cli/coordinators"
	"github.com/talonhq/talon/internal/cli/debug"
	"github.com/talonhq/talon/internal/cli/events"
	"github.com/talonhq/talon/internal/cli/jobs"
	"github.com/talonhq/talon/internal/cli/nodes"
	"github.com/talonhq/talon/internal/cli/placement"
	"github.com/talonhq/talon/internal/cli/top"
	"github.com/talonhq/talon/internal/cli/version"
)

// Exit codes of talonctl (see cmdutil).
const (
	ExitOK           = cmdutil.ExitOK
	ExitFailure      = cmdutil.ExitFailure
	ExitUsage        = cmdutil.ExitUsage
	ExitUnavailable  = cmdutil.ExitUnavailable
	ExitAuthRejected = cmdutil.ExitAuthRejected
)

// Factory, IOStreams and ExitError are defined in cmdutil, which command
// packages import; the aliases keep this package's API whole.
type (
	Factory   = cmdutil.Factory
	IOStreams = cmdutil.IOStreams
	ExitError = cmdutil.ExitError
)

// DefaultFactory is the factory of the real process.
func DefaultFactory() *Factory { return cmdutil.System() }

// Main runs talonctl with args and returns the exit code. Results go to
// f.IO.Out; errors go to f.IO.ErrOut with the server's message.
func Main(ctx context.Context, args []string, f *Factory) int {
	defer f.Close()
	root := NewCmdRoot(f)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	// cobra reports some command-line errors as plain ones.
	var ee *ExitError
	if !errors.As(err, &ee) && strings.HasPrefix(err.Error(), "unknown command ") {
		err = cmdutil.UsageError(err)
	}
	if ee != nil && ee.Silent {
		return ee.Code
	}
	fmt.Fprintf(f.IO.ErrOut, "talonctl: %s\n", cmdutil.Message(err))
	code := cmdutil.ExitCode(err)
	hint := cmdutil.Hint(err, allowStaleGiven(cmd))
	if code == ExitUsage {
		if hint != "" && hint != cmdutil.UsageHint {
			fmt.Fprintf(f.IO.ErrOut, "hint: %s\n", hint)
		}
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(f.IO.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	} else if hint != "" {
		fmt.Fprintf(f.IO.ErrOut, "hint: %s\n", hint)
	}
	return code
}

// allowStaleGiven reports whether cmd ran with --allow-stale.
func allowStaleGiven(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	fl := cmd.Flags().Lookup("allow-stale")
	return fl != nil && fl.Value.String() == "true"
}

// NewCmdRoot builds the talonctl command tree over f; it binds the global
// connection flags into f.Conn.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "talonctl",
		Short: "Operate a Talon cluster through the coordinators' /api/v1",
		Long: `talonctl shows a Talon cluster's state, lists its nodes, their events and every
coordinator's own view, explains placement and simulates drains and new
workers, tells a token what it may do (auth whoami, auth can-i), and cordons
and drains workers.
It speaks only to the coordinators' management API (/api/v1) on their admin
listeners: reads, and the operator actions nodes cordon, uncordon and drain
(the coordinators mark the worker's record in the store; talonctl never
contacts an address a worker advertises). Nouns come first, as in
talonctl nodes list; kubectl's verb-first habits (get nodes, describe,
cordon, drain, explain, status) get a hint naming the talonctl command.

Connection: --server (repeat or comma-separate to fail over in order; env
TALONCTL_SERVER; default ` + cmdutil.DefaultServer + `), --token or --token-file
(env TALONCTL_TOKEN), --ca-file or --insecure-skip-tls-verify, --timeout, and
--context (env TALONCTL_CONTEXT) to use a named context of the configuration
file $XDG_CONFIG_HOME/talon/talonctl.yaml, or of the file --talonconfig (env
TALONCTL_CONFIG) names (see talonctl config --help).
Precedence: flag > environment > context > default. Tokens are never printed.
talonctl tries first the server that last answered, in this invocation or,
for 5 minutes, an earlier one with the same context and servers (a cache file
under $XDG_CACHE_HOME/talonctl/): a server that gave no answer within
--attempt-timeout costs that deadline once per invocation (it is not asked
again for 5s, then with a 500ms deadline), and an earlier invocation's silent
server is tried last, with a 500ms deadline.

Output: results go to stdout, errors and warnings to stderr. Colour only on a
terminal and never with NO_COLOR set. Relative times on a terminal, RFC 3339
timestamps (UTC) when piped. -o json and -o yaml print the API's field names.

` + cmdutil.ExitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Every command inherits the flag error function: usage errors that
	// suggest the nearest flag name.
	root.SetFlagErrorFunc(cmdutil.FlagError)
	// Like the nouns (cmdutil.NewGroup): an unknown command is a usage
	// error that suggests the nearest ones; no command prints the help.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		if err := cmdutil.VerbFirstError(cmd, args); err != nil {
			return err // a kubectl habit: name the talonctl command
		}
		return cmdutil.UnknownCommandError(cmd, args[0])
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	f.Conn.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc(cmdutil.FlagContext, cmdutil.CompleteContexts(f))
	_ = root.RegisterFlagCompletionFunc(cmdutil.FlagServer, cobra.NoFileCompletions)
	_ = root.RegisterFlagCompletionFunc(cmdutil.FlagToken, cobra.NoFileCompletions)
	_ = root.RegisterFlagCompletionFunc(cmdutil.FlagTimeout, cobra.NoFileCompletions)
	_ = root.MarkPersistentFlagFilename(cmdutil.FlagConfig, "yaml", "yml")

	root.AddCommand(
		cluster.NewCmdCluster(f),
		nodes.NewCmdNodes(f),
		coordinators.NewCmdCoordinators(f),
		events.NewCmdEvents(f, nil),
		jobs.NewCmdWarm(f, nil),
		jobs.NewCmdFree(f, nil),
		jobs.NewCmdJobs(f),
		placement.NewCmdPlacement(f),
		config.NewCmdConfig(f),
		auth.NewCmdAuth(f),
		debug.NewCmdDebug(f),
		top.NewCmdTop(f, nil),
		version.NewCmdVersion(f, nil),
		completion.NewCmdCompletion(f, nil),
	)
	return root
}
