// Package placement holds the `talonctl placement` noun; its verbs live
// in subpackages.
package placement

import (
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/placement/explain"
	"github.com/talonhq/talon/internal/cli/placement/simulate"
)

// NewCmdPlacement returns `talonctl placement` with its verbs.
func NewCmdPlacement(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.NewGroup("placement", "Explain where keys are placed and simulate membership changes",
		`Placement is rendezvous (HRW) hashing over the eligible workers: healthy or
degraded, ready, not expired. Every coordinator answers the same owners for
the same PlacementVersion.`)
	cmd.AddCommand(explain.NewCmdExplain(f, nil), simulate.NewCmdSimulate(f, nil))
	return cmd
}
