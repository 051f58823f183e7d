// Package renamecontext implements `talonctl config rename-context`.
package renamecontext

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// RenameContextOptions are the parsed arguments of `config rename-context`.
type RenameContextOptions struct {
	IO         *cmdutil.IOStreams
	ConfigFile func() (*cliconfig.File, error)

	Old, New string
}

// NewCmdRenameContext returns the command; runF replaces its run function in tests.
func NewCmdRenameContext(f *cmdutil.Factory, runF func(*RenameContextOptions) error) *cobra.Command {
	opts := &RenameContextOptions{IO: &f.IO, ConfigFile: f.ConfigFile}
	cmd := &cobra.Command{
		Use:   "rename-context OLD NEW",
		Short: "Rename a context of the configuration file",
		Long: `Rename the context OLD to NEW, which must not exist yet; current-context
follows the rename. The file is replaced atomically with mode 0600; the rest
of it (comments included) is kept.`,
		Args: cmdutil.ExactArgs(2, "OLD", "NEW"),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return cmdutil.CompleteContexts(f)(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Old, opts.New = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return renameContextRun(opts)
		},
	}
	return cmd
}

func renameContextRun(opts *RenameContextOptions) error {
	file, err := opts.ConfigFile()
	if err != nil {
		return err
	}
	if err := file.RenameContext(opts.Old, opts.New); err != nil {
		return cmdutil.UsageError(err)
	}
	if err := file.Save(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Renamed context %q to %q in %s.\n", opts.Old, opts.New, file.Path())
	return err
}
