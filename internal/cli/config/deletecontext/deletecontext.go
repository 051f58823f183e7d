// Package deletecontext implements `talonctl config delete-context`.
package deletecontext

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// DeleteContextOptions are the parsed arguments of `config delete-context`.
type DeleteContextOptions struct {
	IO         *cmdutil.IOStreams
	ConfigFile func() (*cliconfig.File, error)

	Name string
}

// NewCmdDeleteContext returns the command; runF replaces its run function in tests.
func NewCmdDeleteContext(f *cmdutil.Factory, runF func(*DeleteContextOptions) error) *cobra.Command {
	opts := &DeleteContextOptions{IO: &f.IO, ConfigFile: f.ConfigFile}
	cmd := &cobra.Command{
		Use:   "delete-context NAME",
		Short: "Remove a context from the configuration file",
		Long: `Remove the context NAME, which the file must define. When it was the current
context, current-context is cleared (a warning says so). The token file it
names is left alone. The file is replaced atomically with mode 0600; the
rest of it (comments included) is kept.`,
		Args:              cmdutil.ExactArgs(1, "NAME"),
		ValidArgsFunction: cmdutil.CompleteContexts(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return deleteContextRun(opts)
		},
	}
	return cmd
}

func deleteContextRun(opts *DeleteContextOptions) error {
	file, err := opts.ConfigFile()
	if err != nil {
		return err
	}
	wasCurrent, err := file.DeleteContext(opts.Name)
	if err != nil {
		return cmdutil.UsageError(err)
	}
	if err := file.Save(); err != nil {
		return err
	}
	if wasCurrent {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %q was the current context; there is none now (set one with talonctl config use-context NAME)\n", opts.Name)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Deleted context %q from %s.\n", opts.Name, file.Path())
	return err
}
