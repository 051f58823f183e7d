package cmdutil

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
)

// CompletionTimeout bounds the API calls of one dynamic completion, so a
// shell never hangs on an unreachable server. A completion that fails
// offers nothing and prints nothing.
const CompletionTimeout = 2 * time.Second

// completionNodes lists the live nodes for a completion, or nil.
func completionNodes(f *Factory, cmd *cobra.Command) []apiv1.Node {
	conn, err := f.Connection()
	if err != nil {
		return nil
	}
	cl, err := f.ClientFor(conn, CompletionTimeout)
	if err != nil {
		return nil
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, CompletionTimeout)
	defer cancel()
	list, err := cl.AllNodes(ctx, apiv1.NodeFilter{})
	if err != nil {
		return nil
	}
	return list.Items
}

// CompleteNodeIDs completes NODE_ID arguments with the live nodes' IDs,
// leaving out those already given.
func CompleteNodeIDs(f *Factory) cobra.CompletionFunc { return completeIDs(f, "") }

// CompleteWorkerIDs completes WORKER arguments with the live workers' IDs
// only (cordon, uncordon and drain act on workers), leaving out those
// already given.
func CompleteWorkerIDs(f *Factory) cobra.CompletionFunc { return completeIDs(f, "worker") }

func completeIDs(f *Factory, role string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		seen := map[string]bool{}
		for _, a := range args {
			seen[a] = true
		}
		var out []cobra.Completion
		for _, n := range completionNodes(f, cmd) {
			if seen[n.NodeID] || !strings.HasPrefix(n.NodeID, toComplete) || (role != "" && n.Role != role) {
				continue
			}
			seen[n.NodeID] = true
			out = append(out, cobra.CompletionWithDesc(n.NodeID, n.Role+", "+n.Health))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// CompleteLabels completes a key=value label selector with the labels the
// live nodes carry.
func CompleteLabels(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		set := map[string]bool{}
		for _, n := range completionNodes(f, cmd) {
			for k, v := range n.Labels {
				if kv := k + "=" + v; strings.HasPrefix(kv, toComplete) {
					set[kv] = true
				}
			}
		}
		return slices.Sorted(maps.Keys(set)), cobra.ShellCompDirectiveNoFileComp
	}
}

// CompleteContexts completes a context name from the configuration file.
func CompleteContexts(f *Factory) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		file, err := f.ConfigFile()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return file.Names(), cobra.ShellCompDirectiveNoFileComp
	}
}

// NoArgs is cobra.NoArgs as a usage error (exit 2).
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageErrorf("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// ExactArgs requires n arguments, named in the error (exit 2).
func ExactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return UsageErrorf("%s takes %d argument(s) (%s), got %d", cmd.CommandPath(), n, strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// MinimumArgs requires at least n arguments, named in the error (exit 2).
func MinimumArgs(n int, name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return UsageErrorf("%s takes at least %d argument(s) (%s...), got %d", cmd.CommandPath(), n, name, len(args))
		}
		return nil
	}
}

// NewGroup returns a noun command that only holds verbs: without a verb it
// prints its help, with an unknown one it fails with a usage error that
// suggests the nearest verbs.
func NewGroup(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return UnknownCommandError(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
}
