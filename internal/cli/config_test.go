package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/config"
)

// TestContexts drives `talonctl config` and the context precedence rules
// against a real admin listener that requires a token, with the
// configuration file in a temporary XDG_CONFIG_HOME.
func TestContexts(t *testing.T) {
	const token = "ctx-s3cret-token"
	e := startEnv(t, envOptions{seed: true, tokens: []config.Secret{token}})
	down := closedURL(t)
	xdg := t.TempDir()
	dir := filepath.Join(xdg, "talon")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dev-token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "talonctl.yaml")
	cfg := fmt.Sprintf(`# contexts of the test cluster
contexts:
  - name: dev
    servers: [%s]
    token-file: dev-token # relative to this file
  - name: down
    servers: [%s]
  - name: multi
    servers: [%s, %s]
    token-file: dev-token
    timeout: 2s
`, e.url, down, down, e.url)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	xdgEnv := "XDG_CONFIG_HOME=" + xdg
	ctl := func(env []string, args ...string) result {
		t.Helper()
		return talonctl(t, run{args: args, env: append([]string{xdgEnv}, env...)})
	}
	expect := func(t *testing.T, r result, code int, stdout string) {
		t.Helper()
		if r.code != code {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
		}
		if stdout != "*" && r.stdout != stdout {
			t.Fatalf("stdout = %q, want %q", r.stdout, stdout)
		}
		if strings.Contains(r.stdout+r.stderr, token) {
			t.Fatalf("output shows the token:\n%s%s", r.stdout, r.stderr)
		}
	}
	allNodes := "node/coord-a\nnode/w-1\nnode/w-2\nnode/w-3\nnode/w-4\nnode/w-5\n"

	t.Run("no current context", func(t *testing.T) {
		r := ctl(nil, "config", "current-context")
		expect(t, r, cli.ExitFailure, "")
		if !strings.Contains(r.stderr, "no current context: set one with talonctl config use-context NAME") {
			t.Errorf("stderr:\n%s", r.stderr)
		}
	})
	t.Run("get-contexts", func(t *testing.T) {
		r := ctl(nil, "config", "get-contexts")
		expect(t, r, cli.ExitOK, "*")
		tok := filepath.Join(dir, "dev-token")
		want := []string{
			"CURRENT NAME SERVERS TOKEN-FILE TLS",
			"dev " + e.url + " " + tok + " -",
			"down " + down + " - -",
			"multi " + down + "," + e.url + " " + tok + " -",
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("get-contexts:\n%s\nwant rows:\n%s", r.stdout, strings.Join(want, "\n"))
		}
		expect(t, ctl(nil, "config", "get-contexts", "-o", "name"), cli.ExitOK, "dev\ndown\nmulti\n")
		expect(t, ctl(nil, "config", "get-contexts", "-o", "name", "multi", "dev"), cli.ExitOK, "multi\ndev\n")
		r = ctl(nil, "config", "get-contexts", "nope")
		expect(t, r, cli.ExitUsage, "")
	})
	t.Run("use-context of an undefined context", func(t *testing.T) {
		r := ctl(nil, "config", "use-context", "nope")
		expect(t, r, cli.ExitUsage, "")
		if !strings.Contains(r.stderr, `context "nope" is not defined in `+cfgPath+` (defined: dev, down, multi)`) {
			t.Errorf("stderr:\n%s", r.stderr)
		}
	})
	t.Run("use-context", func(t *testing.T) {
		expect(t, ctl(nil, "config", "use-context", "dev"), cli.ExitOK, "Switched to context \"dev\".\n")
		st, err := os.Stat(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("config file mode %v, want 0600", st.Mode().Perm())
		}
		b, _ := os.ReadFile(cfgPath)
		for _, want := range []string{"# contexts of the test cluster", "# relative to this file", "current-context: dev"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("config file lacks %q:\n%s", want, b)
			}
		}
		expect(t, ctl(nil, "config", "current-context"), cli.ExitOK, "dev\n")
		r := ctl(nil, "config", "get-contexts")
		if !strings.Contains(r.stdout, "*         dev ") {
			t.Errorf("dev is not marked current:\n%s", r.stdout)
		}
	})
	tests := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string
	}{
		{"current context with its token file", nil, nil, cli.ExitOK, allNodes},
		{"env context beats current-context", []string{"TALONCTL_CONTEXT=down"}, nil, cli.ExitUnavailable, ""},
		{"flag context beats env context", []string{"TALONCTL_CONTEXT=down"}, []string{"--context", "dev"}, cli.ExitOK, allNodes},
		{"context servers fail over", nil, []string{"--context", "multi"}, cli.ExitOK, allNodes},
		{"env server beats context", []string{"TALONCTL_SERVER=" + down}, nil, cli.ExitUnavailable, ""},
		{"flag server beats env server", []string{"TALONCTL_SERVER=" + down}, []string{"--server", e.url}, cli.ExitOK, allNodes},
		{"env token beats context token file", []string{"TALONCTL_TOKEN=wrong"}, nil, cli.ExitAuthRejected, ""},
		{"flag token beats env token", []string{"TALONCTL_TOKEN=wrong"}, []string{"--token", token}, cli.ExitOK, allNodes},
		{"undefined flag context", nil, []string{"--context", "nope"}, cli.ExitUsage, ""},
		{"undefined env context", []string{"TALONCTL_CONTEXT=nope"}, nil, cli.ExitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"nodes", "list", "-o", "name"}, tt.args...)
			expect(t, ctl(tt.env, args...), tt.code, tt.stdout)
		})
	}
	t.Run("current-context follows the override", func(t *testing.T) {
		expect(t, ctl([]string{"TALONCTL_CONTEXT=down"}, "config", "current-context"), cli.ExitOK, "down\n")
		expect(t, ctl([]string{"TALONCTL_CONTEXT=down"}, "config", "current-context", "--context", "multi"), cli.ExitOK, "multi\n")
		r := ctl([]string{"TALONCTL_CONTEXT=nope"}, "config", "current-context")
		expect(t, r, cli.ExitFailure, "")
		if !strings.Contains(r.stderr, `TALONCTL_CONTEXT: context "nope" is not defined`) {
			t.Errorf("stderr:\n%s", r.stderr)
		}
	})
	t.Run("broken config file", func(t *testing.T) {
		if err := os.WriteFile(cfgPath, []byte("contexts:\n  - name: x\n    servers: [a]\n    tokn: y\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := ctl(nil, "nodes", "list")
		expect(t, r, cli.ExitFailure, "")
		if !strings.Contains(r.stderr, cfgPath) || !strings.Contains(r.stderr, "field tokn not found") {
			t.Errorf("stderr does not name the file and the key:\n%s", r.stderr)
		}
	})
}

// TestConfigEdit drives config view, set-context, rename-context and
// delete-context on a file named by --talonconfig or TALONCTL_CONFIG (not
// the XDG one), uses the contexts written against a real admin listener
// that requires a token, and compares each step's output and the file with
// testdata/config-*.golden.
func TestConfigEdit(t *testing.T) {
	const token = "edit-s3cret-token"
	e := startEnv(t, envOptions{seed: true, tokens: []config.Secret{token}})
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "sub", "ci.yaml")
	tokPath := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokPath, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	down := closedURL(t)
	scrub := strings.NewReplacer(e.url, "http://ADMIN", down, "http://DOWN", dir, "/DIR")
	cfgEnv := []string{"TALONCTL_CONFIG=" + cfgPath}
	step := func(t *testing.T, name string, env []string, code int, args ...string) result {
		t.Helper()
		r := talonctl(t, run{args: args, env: env})
		if r.code != code {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, token) {
			t.Fatalf("output shows the token:\n%s%s", r.stdout, r.stderr)
		}
		file, err := os.ReadFile(cfgPath)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		golden(t, "config-"+name, scrub.Replace("--- stdout\n"+r.stdout+"--- stderr\n"+r.stderr+"--- "+filepath.Base(cfgPath)+"\n"+string(file)))
		return r
	}
	t.Run("view of no file", func(t *testing.T) {
		step(t, "view-missing", cfgEnv, cli.ExitOK, "config", "view")
	})
	t.Run("set-context creates", func(t *testing.T) {
		step(t, "set-context-create", cfgEnv, cli.ExitOK, "config", "set-context", "ci", "--server", down+","+e.url, "--token-file", tokPath, "--use")
		st, err := os.Stat(cfgPath)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("config file: %v, mode %v; want 0600", err, st.Mode().Perm())
		}
		// The context works: the first server is down, the token is read from the file.
		r := talonctl(t, run{args: []string{"nodes", "get", "w-1", "-o", "name"}, env: cfgEnv})
		if r.code != cli.ExitOK || r.stdout != "node/w-1\n" {
			t.Fatalf("nodes get through the new context: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("set-context changes only what is given", func(t *testing.T) {
		step(t, "set-context-modify", cfgEnv, cli.ExitOK, "config", "set-context", "ci", "-s", e.url, "--timeout", "4s")
		step(t, "set-context-second", cfgEnv, cli.ExitOK, "config", "set-context", "other", "--server", e.url, "--insecure-skip-tls-verify")
	})
	t.Run("view", func(t *testing.T) {
		step(t, "view", cfgEnv, cli.ExitOK, "config", "view")
		step(t, "view-minify-json", cfgEnv, cli.ExitOK, "config", "view", "--minify", "-o", "json")
	})
	t.Run("--talonconfig beats TALONCTL_CONFIG", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"--talonconfig", cfgPath, "config", "get-contexts", "-o", "name"}, env: []string{"TALONCTL_CONFIG=" + filepath.Join(dir, "none.yaml")}})
		if r.code != cli.ExitOK || r.stdout != "ci\nother\n" {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("rename-context", func(t *testing.T) {
		step(t, "rename-context", cfgEnv, cli.ExitOK, "config", "rename-context", "ci", "prod")
		r := talonctl(t, run{args: []string{"config", "current-context"}, env: cfgEnv})
		if r.stdout != "prod\n" {
			t.Fatalf("current-context after the rename: %q", r.stdout)
		}
	})
	t.Run("delete-context", func(t *testing.T) {
		step(t, "delete-context-current", cfgEnv, cli.ExitOK, "config", "delete-context", "prod")
		step(t, "delete-context-other", cfgEnv, cli.ExitOK, "config", "delete-context", "other")
	})
	t.Run("mistakes", func(t *testing.T) {
		step(t, "set-context-no-server", cfgEnv, cli.ExitUsage, "config", "set-context", "new", "--token-file", tokPath)
		step(t, "set-context-token", cfgEnv, cli.ExitUsage, "config", "set-context", "new", "--server", e.url, "--token", token)
		step(t, "set-context-bad-timeout", cfgEnv, cli.ExitUsage, "config", "set-context", "new", "--server", e.url, "--timeout", "soon")
		step(t, "set-context-tls-conflict", cfgEnv, cli.ExitUsage, "config", "set-context", "new", "--server", e.url, "--ca-file", tokPath, "--insecure-skip-tls-verify")
		step(t, "delete-context-undefined", cfgEnv, cli.ExitUsage, "config", "delete-context", "nope")
		step(t, "rename-context-undefined", cfgEnv, cli.ExitUsage, "config", "rename-context", "nope", "x")
		step(t, "talonconfig-empty", nil, cli.ExitUsage, "--talonconfig=", "config", "view")
	})
}
