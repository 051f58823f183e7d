package devcluster

import (
	"fmt"
	"path/filepath"

	"github.com/talonhq/talon/internal/cli/cliconfig"
)

// ContextFile is the talonctl configuration file a dev cluster writes into
// its directory (TALONCTL_CONFIG=<dir>/talonctl.yaml), and ContextName the
// context in it: every coordinator's admin URL, in the order talonctl
// tries them, and the admin token file. It is the dev cluster's own file,
// so that the user's configuration is never edited.
const (
	ContextFile = "talonctl.yaml"
	ContextName = "dev"
)

// writeContext creates or updates the context ContextName in
// <dir>/talonctl.yaml with admins and, when the cluster has one, the token
// file, and makes it the file's current context.
func (d *devDir) writeContext(admins []string) (string, error) {
	path := filepath.Join(d.dir, ContextFile)
	f, err := cliconfig.Load(path)
	if err != nil {
		return "", fmt.Errorf("talonctl context: %w", err)
	}
	tokenFile := ""
	if d.adminToken != "" {
		tokenFile = filepath.Join(d.dir, AdminTokenFile)
	}
	if _, err := f.SetContext(ContextName, cliconfig.ContextSettings{Servers: admins, TokenFile: &tokenFile}); err != nil {
		return "", fmt.Errorf("talonctl context: %w", err)
	}
	if err := f.SetCurrentContext(ContextName); err != nil {
		return "", fmt.Errorf("talonctl context: %w", err)
	}
	if err := f.Save(); err != nil {
		return "", fmt.Errorf("talonctl context: %w", err)
	}
	return path, nil
}
