// Package config holds the `talonctl config` noun: the contexts of the
// configuration file (see package cliconfig for the file). Its verbs live
// in subpackages.
package config

import (
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/config/currentcontext"
	"github.com/talonhq/talon/internal/cli/config/deletecontext"
	"github.com/talonhq/talon/internal/cli/config/getcontexts"
	"github.com/talonhq/talon/internal/cli/config/renamecontext"
	"github.com/talonhq/talon/internal/cli/config/setcontext"
	"github.com/talonhq/talon/internal/cli/config/usecontext"
	"github.com/talonhq/talon/internal/cli/config/view"
)

// FileHelp documents the configuration file.
const FileHelp = `talonctl reads $XDG_CONFIG_HOME/talon/talonctl.yaml (default
~/.config/talon/talonctl.yaml), or the file --talonconfig or TALONCTL_CONFIG
names (the flag first): named contexts, each with the coordinators'
admin URLs and how to authenticate to them, and the current context.

  current-context: prod
  contexts:
    - name: prod
      servers: [https://coord-a.prod:7401, https://coord-b.prod:7401]
      token-file: /etc/talon/admin-token   # relative names are relative to this file
      ca-file: /etc/talon/admin-ca.pem
      timeout: 5s
    - name: dev
      servers: [http://127.0.0.1:7401]

The file names a token file, never a token. Unknown keys are errors. A
setting is taken from the first of: its flag (--server, --token,
--token-file, --ca-file, --insecure-skip-tls-verify, --timeout), its
environment variable (TALONCTL_SERVER, TALONCTL_TOKEN), the context, the
default. The context is the first of --context, TALONCTL_CONTEXT and
current-context.

set-context, delete-context, rename-context and use-context rewrite the file
atomically with mode 0600, keeping the rest of it (comments included).`

// NewCmdConfig returns `talonctl config` with its verbs.
func NewCmdConfig(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.NewGroup("config", "Show, edit and switch the contexts of talonctl's configuration file", FileHelp)
	cmd.AddCommand(
		view.NewCmdView(f, nil),
		setcontext.NewCmdSetContext(f, nil),
		deletecontext.NewCmdDeleteContext(f, nil),
		renamecontext.NewCmdRenameContext(f, nil),
		usecontext.NewCmdUseContext(f, nil),
		getcontexts.NewCmdGetContexts(f, nil),
		currentcontext.NewCmdCurrentContext(f, nil),
	)
	return cmd
}
