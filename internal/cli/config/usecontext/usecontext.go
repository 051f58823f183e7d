// Package usecontext implements `talonctl config use-context`.
package usecontext

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// UseContextOptions are the parsed arguments of `config use-context`.
type UseContextOptions struct {
	IO         *cmdutil.IOStreams
	ConfigFile func() (*cliconfig.File, error)

	Name string
}

// NewCmdUseContext returns the command; runF replaces its run function in tests.
func NewCmdUseContext(f *cmdutil.Factory, runF func(*UseContextOptions) error) *cobra.Command {
	opts := &UseContextOptions{IO: &f.IO, ConfigFile: f.ConfigFile}
	cmd := &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make NAME the current context of the configuration file",
		Long: `Set current-context in the configuration file to NAME, which the file must
define. The file is replaced atomically with mode 0600; the rest of it
(comments included) is kept.`,
		Args:              cmdutil.ExactArgs(1, "NAME"),
		ValidArgsFunction: cmdutil.CompleteContexts(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return useContextRun(opts)
		},
	}
	return cmd
}

func useContextRun(opts *UseContextOptions) error {
	file, err := opts.ConfigFile()
	if err != nil {
		return err
	}
	if err := file.SetCurrentContext(opts.Name); err != nil {
		return cmdutil.UsageError(err)
	}
	if err := file.Save(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Switched to context %q.\n", opts.Name)
	return err
}
