// Package debug holds the `talonctl debug` noun; its verbs live in
// subpackages.
package debug

import (
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/debug/bundle"
)

// NewCmdDebug returns `talonctl debug` with its verbs.
func NewCmdDebug(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.NewGroup("debug", "Collect what a maintainer asks for first",
		`debug bundle gathers, in one archive, the client's and every coordinator's
versions, /api/v1 snapshots, metrics over a window, goroutine and heap
profiles and each coordinator's configuration with secrets redacted.`)
	cmd.AddCommand(bundle.NewCmdBundle(f, nil))
	return cmd
}
