// Package nodes holds the `talonctl nodes` noun; its verbs live in the
// subpackages list, get, describe, cordon (with uncordon) and drain, and
// nodetable renders nodes for list and get.
package nodes

import (
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/nodes/cordon"
	"github.com/talonhq/talon/internal/cli/nodes/describe"
	"github.com/talonhq/talon/internal/cli/nodes/drain"
	"github.com/talonhq/talon/internal/cli/nodes/get"
	"github.com/talonhq/talon/internal/cli/nodes/list"
)

// NewCmdNodes returns `talonctl nodes` with its verbs.
func NewCmdNodes(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.NewGroup("nodes", "List and show the cluster's coordinators and workers",
		`The nodes of a cluster are its coordinators and workers: one leased status
record per process, as the coordinators read them from the shared store.`)
	cmd.Aliases = []string{"node", "no"} // kubectl's names of the resource
	cmd.AddCommand(list.NewCmdList(f, nil), get.NewCmdGet(f, nil), describe.NewCmdDescribe(f, nil),
		cordon.NewCmdCordon(f, nil), cordon.NewCmdUncordon(f, nil), drain.NewCmdDrain(f, nil))
	return cmd
}
