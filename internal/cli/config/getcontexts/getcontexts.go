// Package getcontexts implements `talonctl config get-contexts`.
package getcontexts

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `config get-contexts`.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputName}

// GetContextsOptions are the parsed arguments and flags of `config get-contexts`.
type GetContextsOptions struct {
	IO         *cmdutil.IOStreams
	ConfigFile func() (*cliconfig.File, error)
	Current    func(*cliconfig.File) (name, source string)

	Names     []string
	Output    string
	NoHeaders bool
}

// NewCmdGetContexts returns the command; runF replaces its run function in tests.
func NewCmdGetContexts(f *cmdutil.Factory, runF func(*GetContextsOptions) error) *cobra.Command {
	opts := &GetContextsOptions{IO: &f.IO, ConfigFile: f.ConfigFile, Current: f.CurrentContext}
	cmd := &cobra.Command{
		Use:   "get-contexts [NAME...]",
		Short: "List the contexts of the configuration file",
		Long: `List the contexts of the configuration file (or the named ones): the
servers, the token file and the TLS settings; the context in effect is marked
with * in the CURRENT column. Tokens are never printed.`,
		ValidArgsFunction: cmdutil.CompleteContexts(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = args
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return getContextsRun(opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row")
	return cmd
}

func getContextsRun(opts *GetContextsOptions) error {
	file, err := opts.ConfigFile()
	if err != nil {
		return err
	}
	contexts := file.Contexts
	if len(opts.Names) > 0 {
		contexts = nil
		for _, n := range opts.Names {
			c, ok := file.Context(n)
			if !ok {
				return cmdutil.UsageError(file.UndefinedError(n))
			}
			contexts = append(contexts, *c)
		}
	}
	if len(contexts) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "No contexts defined in %s.\n", file.Path())
		return nil
	}
	if opts.Output == cmdutil.OutputName {
		for _, c := range contexts {
			fmt.Fprintln(opts.IO.Out, c.Name)
		}
		return nil
	}
	current, _ := opts.Current(file)
	t := cmdutil.NewTable("CURRENT", "NAME", "SERVERS", "TOKEN-FILE", "TLS")
	for _, c := range contexts {
		mark := ""
		if c.Name == current {
			mark = "*"
		}
		tlsMode := "-"
		switch {
		case c.InsecureSkipTLSVerify:
			tlsMode = "insecure-skip-tls-verify"
		case c.CAFile != "":
			tlsMode = "ca-file " + c.CAFile
		}
		tokenFile := c.TokenFile
		if tokenFile == "" {
			tokenFile = "-"
		}
		t.AddRow(mark, c.Name, strings.Join(c.Servers, ","), tokenFile, tlsMode)
	}
	return t.Render(opts.IO.Out, opts.NoHeaders)
}
