package cli_test

import (
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
)

// TestExitCodes produces each documented exit code against a real admin
// listener (or none) and checks where the messages go.
func TestExitCodes(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := "TALONCTL_SERVER=" + e.url
	down := closedURL(t)
	tests := []struct {
		name       string
		args       []string
		env        []string
		code       int
		stdout     string // exact
		stderrHas  []string
		stderrNot  []string
		stdoutNote string
	}{
		{name: "success with no rows", args: []string{"nodes", "list", "-l", "zone=nowhere"}, env: []string{server},
			code: cli.ExitOK, stdout: "", stderrHas: []string{"No nodes found."}},
		{name: "no rows as name", args: []string{"nodes", "list", "--health", "unknown", "-o", "name"}, env: []string{server},
			code: cli.ExitOK, stdout: ""},
		{name: "not found", args: []string{"nodes", "get", "w-9"}, env: []string{server},
			code: cli.ExitFailure, stderrHas: []string{`404 not_found: node "w-9" is not in cluster "test"`}},
		{name: "server down", args: []string{"nodes", "list"}, env: []string{"TALONCTL_SERVER=" + down},
			code: cli.ExitUnavailable, stderrHas: []string{"admin api unavailable", "connection refused", "hint: no server answered"}},
		{name: "failover to the next server", args: []string{"nodes", "list", "-o", "name", "--server", down + "," + e.url},
			code: cli.ExitOK, stdout: "node/coord-a\nnode/w-1\nnode/w-2\nnode/w-3\nnode/w-4\nnode/w-5\n"},
		{name: "bad role", args: []string{"nodes", "list", "--role", "boss"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`--role "boss": must be one of coordinator, worker`, "Run 'talonctl nodes list --help'"}},
		{name: "bad health", args: []string{"nodes", "list", "--health", "meh"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`--health "meh": must be one of healthy, degraded, unhealthy, unknown`}},
		{name: "bad output", args: []string{"nodes", "list", "-o", "xml"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`--output "xml": must be one of table, wide, json, yaml, name`}},
		{name: "bad sort key", args: []string{"nodes", "list", "--sort-by", "size"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`--sort-by "size": must be a JSONPath such as .capacity.residentBytes, or one of name, role, health`}},
		{name: "bad selector", args: []string{"nodes", "list", "-l", "zone in (a"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`--selector "zone in (a": must be a Kubernetes label selector`}},
		{name: "selector matching nothing", args: []string{"nodes", "list", "-l", "zone=a,zone=b"}, env: []string{server},
			code: cli.ExitOK, stdout: "", stderrHas: []string{"No nodes found."}},
		{name: "unknown field", args: []string{"nodes", "list", "--field-selector", "zone=a"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`--field-selector "zone=a": field "zone" is not supported; supported fields: nodeId, role, health, ready, version, address`}},
		{name: "zero replicas", args: []string{"placement", "explain", "k", "--replicas", "0"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{"--replicas 0: must be an integer from 1 to 16"}},
		{name: "too many replicas", args: []string{"placement", "explain", "k", "-r", "17"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{"--replicas 17: must be an integer from 1 to 16"}},
		{name: "non-numeric replicas", args: []string{"placement", "explain", "k", "--replicas", "two"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`invalid argument "two" for "-r, --replicas"`}},
		{name: "explain without key", args: []string{"placement", "explain"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{"talonctl placement explain takes 1 argument(s) (KEY), got 0"}},
		{name: "bad node id", args: []string{"nodes", "get", "no/such"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{`NODE_ID "no/such"`}},
		{name: "unknown flag", args: []string{"nodes", "list", "--colour"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{"unknown flag: --colour"}},
		{name: "unknown command", args: []string{"nodez"}, code: cli.ExitUsage, stderrHas: []string{`unknown command "nodez" for "talonctl"`}},
		{name: "unknown verb", args: []string{"nodes", "lst"}, code: cli.ExitUsage, stderrHas: []string{`unknown command "lst" for "talonctl nodes"`}},
		{name: "bad interval", args: []string{"nodes", "list", "-w", "--interval", "0s"}, env: []string{server},
			code: cli.ExitUsage, stderrHas: []string{"--interval 0s: must be positive"}},
		{name: "bad completion shell", args: []string{"completion", "tcsh"},
			code: cli.ExitUsage, stderrHas: []string{`SHELL "tcsh": must be one of bash, zsh, fish, powershell`}},
		{name: "bad server URL", args: []string{"nodes", "list", "--server", "ftp://x"},
			code: cli.ExitUsage, stderrHas: []string{"ftp://x", "scheme must be http or https"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, env: tt.env})
			if r.code != tt.code {
				t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.code != cli.ExitOK && r.stdout != "" {
				t.Errorf("a failing command wrote to stdout:\n%s", r.stdout)
			}
			if tt.code == cli.ExitOK && r.stdout != tt.stdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.stdout)
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
		})
	}
}

// TestUnavailable503 makes the store fail: the coordinator fails closed
// with 503, which is exit code 3; --allow-stale shows the last good
// snapshot marked stale.
func TestUnavailable503(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := "TALONCTL_SERVER=" + e.url
	// One answer after seeding: the coordinator's last good snapshot now
	// holds the seeded workers (a snapshot read after the request came).
	if r := talonctl(t, run{args: []string{"nodes", "list", "-o", "name"}, env: []string{server}}); r.code != cli.ExitOK {
		t.Fatalf("nodes list before the fault: exit %d\n%s", r.code, r.stderr)
	}
	e.store.SetFault(state.ErrUnavailable)
	for _, args := range [][]string{{"nodes", "list"}, {"cluster", "status"}, {"nodes", "get", "w-1"}, {"placement", "explain", "k"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := talonctl(t, run{args: args, env: []string{server}})
			if r.code != cli.ExitUnavailable || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, want 3 and nothing", r.code, r.stdout)
			}
			if !strings.Contains(r.stderr, "503 not_ready") {
				t.Errorf("stderr lacks the server's 503 answer:\n%s", r.stderr)
			}
			if strings.Contains(r.stderr, "hint: no server answered") {
				t.Errorf("a server answered, yet the hint says none did:\n%s", r.stderr)
			}
		})
	}
	t.Run("allow-stale", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"cluster", "status", "--allow-stale"}, env: []string{server}})
		if r.code != cli.ExitOK {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "warning: stale answer") || !strings.Contains(r.stdout, "(stale)") ||
			!strings.Contains(r.stdout, "memory, unhealthy (unavailable)") {
			t.Errorf("stale answer not marked:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
		r = talonctl(t, run{args: []string{"nodes", "list", "--allow-stale", "-o", "name"}, env: []string{server}})
		if r.code != cli.ExitOK || r.stdout != "node/coord-a\nnode/w-1\nnode/w-2\nnode/w-3\nnode/w-4\nnode/w-5\n" || !strings.Contains(r.stderr, "warning: stale answer") {
			t.Errorf("nodes list --allow-stale: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestAuth runs against a listener that requires a token: a wrong or
// missing token is exit code 4, and the token never shows up in output.
func TestAuth(t *testing.T) {
	const good, bad = "s3cret-admin-token", "wr0ng-token-value"
	e := startEnv(t, envOptions{tokens: []config.Secret{good}})
	server := "TALONCTL_SERVER=" + e.url
	tests := []struct {
		name string
		args []string
		env  []string
		code int
	}{
		{"no token", []string{"nodes", "list"}, []string{server}, cli.ExitAuthRejected},
		{"wrong token flag", []string{"nodes", "list", "--token", bad}, []string{server}, cli.ExitAuthRejected},
		{"wrong token env", []string{"cluster", "status"}, []string{server, "TALONCTL_TOKEN=" + bad}, cli.ExitAuthRejected},
		{"flag beats env", []string{"nodes", "list", "--token", good}, []string{server, "TALONCTL_TOKEN=" + bad}, cli.ExitOK},
		{"env token", []string{"nodes", "list"}, []string{server, "TALONCTL_TOKEN=" + good}, cli.ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, env: tt.env})
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", r.code, tt.code, r.stderr)
			}
			if tt.code == cli.ExitAuthRejected {
				if !strings.Contains(r.stderr, "401 unauthenticated") || !strings.Contains(r.stderr, "hint: check --token") {
					t.Errorf("stderr lacks the 401 and the hint:\n%s", r.stderr)
				}
			}
			for _, tok := range []string{good, bad} {
				if strings.Contains(r.stdout+r.stderr, tok) {
					t.Errorf("output shows a token:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				}
			}
		})
	}
}
