// Package completion implements `talonctl completion`.
package completion

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Shells are the arguments of `completion`.
var Shells = []string{"bash", "zsh", "fish", "powershell"}

// CompletionOptions are the parsed arguments of `completion`.
type CompletionOptions struct {
	IO    *cmdutil.IOStreams
	Shell string
	// Root is the command tree to complete.
	Root *cobra.Command
}

// NewCmdCompletion returns the command; runF replaces its run function in tests.
func NewCmdCompletion(f *cmdutil.Factory, runF func(*CompletionOptions) error) *cobra.Command {
	opts := &CompletionOptions{IO: &f.IO}
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print the completion script of a shell. Completion covers commands, flags and
flag values, and asks the API (within 2 seconds, silently) for live node IDs
and labels.

  bash:        source <(talonctl completion bash)
               (needs the bash-completion package; or write it to
               /etc/bash_completion.d/talonctl)
  zsh:         talonctl completion zsh > "${fpath[1]}/_talonctl"
  fish:        talonctl completion fish > ~/.config/fish/completions/talonctl.fish
  powershell:  talonctl completion powershell | Out-String | Invoke-Expression

The scripts are also shipped in completions/.`,
		ValidArgs: Shells,
		Args:      cmdutil.ExactArgs(1, "SHELL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(Shells, args[0]) {
				return cmdutil.UsageErrorf("SHELL %q: must be one of %s", args[0], strings.Join(Shells, ", "))
			}
			opts.Shell, opts.Root = args[0], cmd.Root()
			if runF != nil {
				return runF(opts)
			}
			return completionRun(opts)
		},
	}
	return cmd
}

func completionRun(opts *CompletionOptions) error {
	w := opts.IO.Out
	switch opts.Shell {
	case "bash":
		return opts.Root.GenBashCompletionV2(w, true)
	case "zsh":
		return opts.Root.GenZshCompletion(w)
	case "fish":
		return opts.Root.GenFishCompletion(w, true)
	}
	return opts.Root.GenPowerShellCompletionWithDesc(w)
}
