// Package auth holds the `talonctl auth` noun; its verbs live in
// subpackages.
package auth

import (
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/auth/cani"
	"github.com/talonhq/talon/internal/cli/auth/whoami"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// NewCmdAuth returns `talonctl auth` with its verbs.
func NewCmdAuth(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.NewGroup("auth", "Show who the token is and what it may do",
		`A coordinator's admin listener authenticates bearer tokens from its token
file: each token has a name (the principal of audit lines) and scopes (read,
operate, metrics). auth whoami and auth can-i ask the coordinator that
answers, so the answer is that listener's (its tokens, its exposure toggles).`)
	cmd.AddCommand(whoami.NewCmdWhoAmI(f, nil), cani.NewCmdCanI(f, nil))
	return cmd
}
