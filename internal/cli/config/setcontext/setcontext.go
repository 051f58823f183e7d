// Package setcontext implements `talonctl config set-context`.
package setcontext

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// SetContextOptions are the parsed arguments and flags of `config set-context`.
type SetContextOptions struct {
	IO         *cmdutil.IOStreams
	ConfigFile func() (*cliconfig.File, error)

	Name     string
	Settings cliconfig.ContextSettings
	// Use makes the context the current one.
	Use bool
}

// NewCmdSetContext returns the command; runF replaces its run function in tests.
func NewCmdSetContext(f *cmdutil.Factory, runF func(*SetContextOptions) error) *cobra.Command {
	opts := &SetContextOptions{IO: &f.IO, ConfigFile: f.ConfigFile}
	var servers []string
	var tokenFile, caFile, timeout string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "set-context NAME --server URL [--token-file FILE] [--ca-file FILE | --insecure-skip-tls-verify] [--timeout D]",
		Short: "Create a context, or change the settings of one",
		Long: `Create the context NAME in the configuration file, or change the settings
given of an existing one (the others are kept). A new context needs --server.
An empty value (--token-file "") removes a setting. File names given here
are made absolute. The file holds no tokens: put the token in a file (mode
0600) and give --token-file; --token is refused.

The file is replaced atomically with mode 0600; the rest of it (comments
included) is kept.`,
		Example: `  talonctl config set-context prod --server https://coord-a:7401,https://coord-b:7401 \
      --token-file /etc/talon/admin-token --ca-file /etc/talon/ca.pem --use
  talonctl config set-context prod --timeout 5s`,
		Args:              cmdutil.ExactArgs(1, "NAME"),
		ValidArgsFunction: cmdutil.CompleteContexts(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if f.Conn.Token != "" {
				return cmdutil.UsageErrorf("--%s: the configuration file holds no tokens; write the token to a file (mode 0600) and give --%s", cmdutil.FlagToken, cmdutil.FlagTokenFile)
			}
			fl := cmd.Flags()
			s := &opts.Settings
			if fl.Changed(cmdutil.FlagServer) {
				for _, it := range servers {
					for _, srv := range strings.Split(it, ",") {
						if srv = strings.TrimSpace(srv); srv != "" {
							s.Servers = append(s.Servers, srv)
						}
					}
				}
				if len(s.Servers) == 0 {
					return cmdutil.UsageErrorf("--%s %q: must name at least one admin URL", cmdutil.FlagServer, strings.Join(servers, ","))
				}
			}
			for _, p := range []struct {
				flag string
				val  string
				dst  **string
			}{{cmdutil.FlagTokenFile, tokenFile, &s.TokenFile}, {cmdutil.FlagCAFile, caFile, &s.CAFile}} {
				if !fl.Changed(p.flag) {
					continue
				}
				v := p.val
				if v != "" {
					abs, err := filepath.Abs(v)
					if err != nil {
						return cmdutil.UsageErrorf("--%s %q: %w", p.flag, v, err)
					}
					v = abs
				}
				*p.dst = &v
			}
			if fl.Changed(cmdutil.FlagInsecure) {
				s.InsecureSkipTLSVerify = &insecure
			}
			if fl.Changed(cmdutil.FlagTimeout) {
				if timeout != "" {
					if d, err := time.ParseDuration(timeout); err != nil || d <= 0 {
						return cmdutil.UsageErrorf("--%s %q: must be a positive duration such as 5s", cmdutil.FlagTimeout, timeout)
					}
				}
				s.Timeout = &timeout
			}
			if runF != nil {
				return runF(opts)
			}
			return setContextRun(opts)
		},
	}
	// These shadow the global connection flags of the same names: here they
	// are the settings stored in the context, not the ones of this run.
	fl := cmd.Flags()
	fl.StringSliceVarP(&servers, cmdutil.FlagServer, "s", nil, "the context's coordinator admin `URL`s, tried in order; repeat or comma-separate (replaces the list)")
	fl.StringVar(&tokenFile, cmdutil.FlagTokenFile, "", "the context's bearer token `FILE` (\"\" removes it)")
	fl.StringVar(&caFile, cmdutil.FlagCAFile, "", "the context's PEM CA certificates `FILE` (\"\" removes it)")
	fl.BoolVar(&insecure, cmdutil.FlagInsecure, false, "do not verify the servers' TLS certificates in this context (insecure; =false removes it)")
	fl.StringVar(&timeout, cmdutil.FlagTimeout, "", "the context's per-request `DURATION`, such as 5s (\"\" removes it)")
	fl.BoolVar(&opts.Use, "use", false, "also make it the current context")
	_ = cmd.RegisterFlagCompletionFunc(cmdutil.FlagServer, cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc(cmdutil.FlagTimeout, cobra.NoFileCompletions)
	return cmd
}

func setContextRun(opts *SetContextOptions) error {
	file, err := opts.ConfigFile()
	if err != nil {
		return err
	}
	created, err := file.SetContext(opts.Name, opts.Settings)
	if err != nil {
		return cmdutil.UsageError(err)
	}
	if opts.Use {
		if err := file.SetCurrentContext(opts.Name); err != nil {
			return err
		}
	}
	if err := file.Save(); err != nil {
		return err
	}
	verb := "Modified"
	if created {
		verb = "Created"
	}
	fmt.Fprintf(opts.IO.Out, "%s context %q in %s.\n", verb, opts.Name, file.Path())
	if opts.Use {
		fmt.Fprintf(opts.IO.Out, "Switched to context %q.\n", opts.Name)
	}
	return nil
}
