package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
)

// dig walks nested maps along path; it returns nil where the path ends.
func dig(m any, path ...string) any {
	for _, p := range path {
		var mm map[string]any
		switch v := m.(type) {
		case object:
			mm = v
		case map[string]any:
			mm = v
		default:
			return nil
		}
		m = mm[p]
	}
	return m
}

// TestExampleConfigs loads the example config files of deploy/systemd as
// the daemon would, with their secret files present.
func TestExampleConfigs(t *testing.T) {
	tmp := t.TempDir()
	for _, f := range []string{"etcd-password", "admin-tokens"} {
		if err := os.WriteFile(filepath.Join(tmp, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for file, role := range map[string]cluster.Role{"systemd/coordinator.yaml": cluster.RoleCoordinator, "systemd/worker.yaml": cluster.RoleWorker} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(tmp, filepath.Base(file))
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/etc/talon/"), []byte(tmp+"/")), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(role, config.Options{ConfigFile: p}); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}
