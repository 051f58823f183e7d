package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli"
)

// TestPlacementSimulate runs placement simulate over the seeded workers
// (w-1, w-2 and w-3 eligible) live and from a saved node list: the same
// membership gives the same answer, byte for byte.
func TestPlacementSimulate(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := "TALONCTL_SERVER=" + e.url
	saved := filepath.Join(t.TempDir(), "nodes.json")
	r := talonctl(t, run{args: []string{"nodes", "list", "-o", "json"}, env: []string{server}})
	if r.code != 0 {
		t.Fatalf("nodes list: exit %d %s", r.code, r.stderr)
	}
	if err := os.WriteFile(saved, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		tty  bool
	}{
		{"placement-simulate-drain", []string{"placement", "simulate", "--drain", "w-3", "--samples", "3000"}, false},
		{"placement-simulate-drain-tty", []string{"placement", "simulate", "--drain", "w-3", "--samples", "3000"}, true},
		{"placement-simulate-add-json", []string{"placement", "simulate", "--add", "2", "--replicas", "2", "--samples", "3000", "-o", "json"}, false},
		{"placement-simulate-drain-add-yaml", []string{"placement", "simulate", "--drain", "w-1", "--add", "1", "--add-prefix", "w-9", "--samples", "500", "-o", "yaml"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, tty: tt.tty, env: []string{server}})
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			golden(t, tt.name, r.stdout)
			// The default replicas live are the cluster's (2 here); from
			// a file, 1.
			from := append(append([]string{}, tt.args...), "--from", saved)
			if !strings.Contains(strings.Join(tt.args, " "), "--replicas") {
				from = append(from, "--replicas", "2")
			}
			f := talonctl(t, run{args: from, tty: tt.tty, env: []string{"TALONCTL_SERVER=" + closedURL(t)}})
			if f.code != 0 || f.stdout != r.stdout {
				t.Errorf("--from the saved list: exit %d, stderr %s, stdout differs:\n%s", f.code, f.stderr, f.stdout)
			}
		})
	}
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--drain", "w-4"}, "--drain w-4: not an eligible worker (absent, or already out of placement)"},
		{[]string{"--add", "1", "--add-prefix", "w-"}, "added worker w-1: a worker of that ID is already eligible"},
		{[]string{"--samples", "0"}, "--samples 0: must be an integer from 1 to 10000000"},
		{[]string{"--replicas", "17"}, "--replicas 17: must be an integer from 1 to 16"},
		{[]string{"--add", "-1"}, "--add -1: must be an integer from 0 to 1000"},
		{[]string{"--from", filepath.Join(t.TempDir(), "absent.json")}, "--from: open"},
	} {
		r := talonctl(t, run{args: append([]string{"placement", "simulate"}, tt.args...), env: []string{server}})
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q, want usage error %q", tt.args, r.code, r.stderr, tt.msg)
		}
	}
}
