// Package coordinators holds the `talonctl coordinators` noun; its verb
// list asks every coordinator for its own view.
package coordinators

import (
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/coordinators/list"
)

// NewCmdCoordinators returns `talonctl coordinators` with its verbs.
func NewCmdCoordinators(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.NewGroup("coordinators", "Show every coordinator's own view of the cluster",
		`Every coordinator answers from its own snapshot of the shared store. The
coordinators verbs ask each of them, one by one, rather than the first that
answers.`)
	cmd.AddCommand(list.NewCmdList(f, nil))
	return cmd
}
