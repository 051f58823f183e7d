// Package view implements `talonctl config view`.
package view

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `config view`.
var Formats = []string{cmdutil.OutputYAML, cmdutil.OutputJSON}

// ViewOptions are the parsed flags of `config view`.
type ViewOptions struct {
	IO         *cmdutil.IOStreams
	ConfigFile func() (*cliconfig.File, error)
	Current    func(*cliconfig.File) (name, source string)

	Output string
	Minify bool
}

// NewCmdView returns the command; runF replaces its run function in tests.
func NewCmdView(f *cmdutil.Factory, runF func(*ViewOptions) error) *cobra.Command {
	opts := &ViewOptions{IO: &f.IO, ConfigFile: f.ConfigFile, Current: f.CurrentContext}
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Print the configuration file's settings",
		Long: `Print the configuration file as talonctl reads it: its path, the current
context and every context, with file names made absolute. --minify prints
only the context in effect (--context, TALONCTL_CONTEXT or current-context).

The file names token files and never holds a token; view prints the names of
the token files and never reads them, so its output holds no secret. A file
that does not exist prints as an empty configuration.`,
		Example: `  talonctl config view
  talonctl config view --minify -o json
  talonctl --talonconfig ./ci.yaml config view`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return viewRun(opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.Minify, "minify", false, "print only the context in effect")
	return cmd
}

// document is what view prints.
type document struct {
	Path           string    `json:"path"`
	Exists         bool      `json:"exists"`
	CurrentContext string    `json:"current-context"`
	Contexts       []context `json:"contexts"`
}

type context struct {
	Name                  string   `json:"name"`
	Servers               []string `json:"servers"`
	TokenFile             string   `json:"token-file,omitempty"`
	CAFile                string   `json:"ca-file,omitempty"`
	InsecureSkipTLSVerify bool     `json:"insecure-skip-tls-verify,omitempty"`
	Timeout               string   `json:"timeout,omitempty"`
}

func viewRun(opts *ViewOptions) error {
	file, err := opts.ConfigFile()
	if err != nil {
		return err
	}
	doc := document{Path: file.Path(), Exists: file.Exists(), CurrentContext: file.CurrentContext, Contexts: []context{}}
	contexts := file.Contexts
	if opts.Minify {
		name, source := opts.Current(file)
		if name == "" {
			return fmt.Errorf("--minify: no context in effect (set one with talonctl config use-context NAME)")
		}
		c, ok := file.Context(name)
		if !ok {
			return fmt.Errorf("--minify: %s: %w", source, file.UndefinedError(name))
		}
		contexts = []cliconfig.Context{*c}
		doc.CurrentContext = name
	}
	for _, c := range contexts {
		doc.Contexts = append(doc.Contexts, context{Name: c.Name, Servers: c.Servers, TokenFile: c.TokenFile,
			CAFile: c.CAFile, InsecureSkipTLSVerify: c.InsecureSkipTLSVerify, Timeout: c.Timeout})
	}
	return cmdutil.WriteData(opts.IO.Out, opts.Output, doc)
}
