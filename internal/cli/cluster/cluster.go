// Package cluster holds the `talonctl cluster` noun; its verbs live in
// subpackages.
package cluster

import (
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cluster/status"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// NewCmdCluster returns `talonctl cluster` with its verbs.
func NewCmdCluster(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.NewGroup("cluster", "Show the cluster as the coordinators see it", "")
	cmd.AddCommand(status.NewCmdStatus(f, nil))
	return cmd
}
