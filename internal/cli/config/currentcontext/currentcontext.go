// Package currentcontext implements `talonctl config current-context`.
package currentcontext

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// CurrentContextOptions are the parsed flags of `config current-context`.
type CurrentContextOptions struct {
	IO         *cmdutil.IOStreams
	ConfigFile func() (*cliconfig.File, error)
	// Current returns the context in effect and where it was named.
	Current func(*cliconfig.File) (name, source string)
}

// ErrNoContext is returned when no context is in effect.
var ErrNoContext = errors.New("no current context")

// NewCmdCurrentContext returns the command; runF replaces its run function in tests.
func NewCmdCurrentContext(f *cmdutil.Factory, runF func(*CurrentContextOptions) error) *cobra.Command {
	opts := &CurrentContextOptions{IO: &f.IO, ConfigFile: f.ConfigFile, Current: f.CurrentContext}
	cmd := &cobra.Command{
		Use:   "current-context",
		Short: "Print the name of the context in effect",
		Long: `Print the name of the context in effect: --context, else TALONCTL_CONTEXT,
else the configuration file's current-context. With none, it fails (exit
code 1); so does a name the file does not define.`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return currentContextRun(opts)
		},
	}
	return cmd
}

func currentContextRun(opts *CurrentContextOptions) error {
	file, err := opts.ConfigFile()
	if err != nil {
		return err
	}
	name, source := opts.Current(file)
	if name == "" {
		return fmt.Errorf("%w: set one with talonctl config use-context NAME (config file %s)", ErrNoContext, file.Path())
	}
	if _, ok := file.Context(name); !ok {
		return fmt.Errorf("%s: %w", source, file.UndefinedError(name))
	}
	_, err = fmt.Fprintln(opts.IO.Out, name)
	return err
}
