package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/testsupport"
)

// hungServer is a TCP listener that accepts connections and never
// answers, as a SIGSTOPped coordinator does; it returns its URL.
func hungServer(t *testing.T) string {
	t.Helper()
	addr, _ := testsupport.HungListener(t, "127.0.0.1")
	return "http://" + addr
}

// TestHungFirstServerRemembered: with the first --server hung, a command
// pays the attempt deadline at most once per invocation however many
// endpoints it calls (the silent server is remembered within the
// invocation), and later invocations pay nothing of it (the server that
// answered is remembered per connection in the cache file), within
// apiv1.ProbeAttemptTimeout for commands that ask every coordinator. Each
// command starts from an empty cache; the figures are logged.
func TestHungFirstServerRemembered(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	hung := hungServer(t)
	const deadline = 2 * time.Second
	cache := t.TempDir()
	servers := "TALONCTL_SERVER=" + hung + "," + e.url
	commands := [][]string{{"nodes", "list"}, {"coordinators", "list"}, {"nodes", "describe", "w-1"}}
	timed := func(args []string, env ...string) (time.Duration, result) {
		start := time.Now()
		r := talonctl(t, run{args: append([]string{"--attempt-timeout", deadline.String()}, args...), env: env})
		return time.Since(start), r
	}
	for _, args := range commands {
		name := strings.Join(args[:2], " ")
		normal, _ := timed(args, "TALONCTL_SERVER="+e.url, "XDG_CACHE_HOME="+t.TempDir())
		if err := os.RemoveAll(filepath.Join(cache, "talonctl")); err != nil {
			t.Fatal(err)
		}
		var took [3]time.Duration
		for i := range took {
			var r result
			took[i], r = timed(args, servers, "XDG_CACHE_HOME="+cache)
			// coordinators list exits 1: the hung server is a coordinator
			// that does not answer.
			if r.code != cli.ExitOK && !(args[0] == "coordinators" && r.code == cli.ExitFailure) {
				t.Fatalf("%s #%d: exit %d\n%s%s", name, i+1, r.code, r.stdout, r.stderr)
			}
		}
		t.Logf("%-16s hung first server, attempt deadline %s: 1st %4dms, 2nd %4dms, 3rd %4dms (alone: %dms)",
			name, deadline, took[0].Milliseconds(), took[1].Milliseconds(), took[2].Milliseconds(), normal.Milliseconds())
		if took[0] >= 2*deadline {
			t.Errorf("%s: 1st invocation took %s: paid the attempt deadline %s more than once", name, took[0], deadline)
		}
		for i, d := range took[1:] {
			if d >= deadline {
				t.Errorf("%s: invocation %d took %s: paid the attempt deadline %s again", name, i+2, d, deadline)
			}
		}
	}
}

// TestServerCacheIgnoresBadFiles: a corrupt, foreign or expired cache
// file is no error and changes nothing; the command rewrites it.
func TestServerCacheIgnoresBadFiles(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	cache := t.TempDir()
	env := []string{"TALONCTL_SERVER=" + e.url, "XDG_CACHE_HOME=" + cache}
	if r := talonctl(t, run{args: []string{"nodes", "list"}, env: env}); r.code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "talonctl", "servers-*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v: want one", files)
	}
	for _, content := range []string{"{not json", `{"kind":"someone-else","key":"x"}`, `{"kind":"talonctl-servers/v1","key":"other","answered":"http://127.0.0.1:1"}`, ""} {
		if err := os.WriteFile(files[0], []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := talonctl(t, run{args: []string{"nodes", "list"}, env: env}); r.code != cli.ExitOK || r.stderr != "" {
			t.Fatalf("cache file %q: exit %d\n%s", content, r.code, r.stderr)
		}
		b, _ := os.ReadFile(files[0])
		if !strings.Contains(string(b), `"answered":"`+e.url+`"`) {
			t.Fatalf("cache file %q not rewritten: %s", content, b)
		}
	}
}
