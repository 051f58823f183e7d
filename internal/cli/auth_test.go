package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/config"
)

// authTokens are one token of each scope, and one of all three.
var authTokens = []config.AdminToken{
	{Name: "viewer", Scopes: config.ScopeRead, Token: "tok-viewer-5f1c"},
	{Name: "ops", Scopes: config.ScopeRead | config.ScopeOperate, Token: "tok-ops-9a3e"},
	{Name: "prometheus", Scopes: config.ScopeMetrics, Token: "tok-prom-27d0"},
	{Name: "operate-only", Scopes: config.ScopeOperate, Token: "tok-opo-c41b"},
	{Name: "admin", Scopes: config.ScopeRead | config.ScopeOperate | config.ScopeMetrics, Token: "tok-admin-0e88"},
	{Name: "maintainer", Scopes: config.ScopeRead | config.ScopeMetrics | config.ScopeDebug, Token: "tok-maint-61d2"},
}

// TestAuthWhoAmIAndCanI runs auth whoami and auth can-i with each token
// against a real coordinator: whoami names the principal, its scopes and
// the coordinator, can-i answers yes (0) or no (1) for every verb as the
// routes themselves would, and a wrong token is exit 4.
func TestAuthWhoAmIAndCanI(t *testing.T) {
	e := startEnv(t, envOptions{scoped: authTokens, metrics: true})
	server := "TALONCTL_SERVER=" + e.url
	want := map[string]string{ // the verbs each token may use
		"viewer":       "read",
		"ops":          "read,cordon,uncordon,drain",
		"prometheus":   "metrics",
		"operate-only": "cordon,uncordon",
		"admin":        "read,metrics,cordon,uncordon,drain",
		"maintainer":   "read,metrics,debug",
	}
	for _, tok := range authTokens {
		t.Run(tok.Name, func(t *testing.T) {
			env := []string{server, "TALONCTL_TOKEN=" + tok.Token.Reveal()}
			r := talonctl(t, run{args: []string{"auth", "whoami"}, env: env})
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("whoami: exit %d, stderr:\n%s", r.code, r.stderr)
			}
			golden(t, "auth-whoami-"+tok.Name, strings.ReplaceAll(r.stdout, e.url, "http://ADMIN"))
			var allowed []string
			for _, verb := range []string{"read", "metrics", "cordon", "uncordon", "drain", "debug"} {
				r := talonctl(t, run{args: []string{"auth", "can-i", verb}, env: env})
				switch {
				case r.code == 0 && r.stdout == "yes\n" && r.stderr == "":
					allowed = append(allowed, verb)
				case r.code == cli.ExitFailure && r.stdout == "no\n" && strings.HasPrefix(r.stderr, tok.Name+" on coord-a: "):
				default:
					t.Fatalf("can-i %s: exit %d, stdout %q, stderr %q", verb, r.code, r.stdout, r.stderr)
				}
				q := talonctl(t, run{args: []string{"auth", "can-i", verb, "-q"}, env: env})
				if q.code != r.code || q.stdout != "" || q.stderr != "" {
					t.Errorf("can-i %s -q: exit %d (want %d), stdout %q, stderr %q", verb, q.code, r.code, q.stdout, q.stderr)
				}
			}
			if got := strings.Join(allowed, ","); got != want[tok.Name] {
				t.Errorf("can-i says yes to %s, want %s", got, want[tok.Name])
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		env := []string{server, "TALONCTL_TOKEN=tok-viewer-5f1c"}
		r := talonctl(t, run{args: []string{"auth", "can-i", "drain", "-o", "json"}, env: env})
		var a struct {
			Verb, Principal, NodeID, Server, Reason string
			Allowed                                 bool
			Scopes                                  []string
		}
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || r.code != cli.ExitFailure || r.stderr != "" {
			t.Fatalf("exit %d, %v, stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
		}
		if a.Verb != "drain" || a.Allowed || a.Principal != "viewer" || a.NodeID != "coord-a" || a.Server != e.url ||
			strings.Join(a.Scopes, ",") != "read,operate" || a.Reason != "needs scope read,operate; the principal has read" {
			t.Errorf("answer %+v", a)
		}
		r = talonctl(t, run{args: []string{"auth", "whoami", "-o", "json"}, env: env})
		if r.code != 0 || !strings.Contains(r.stdout, `"principal": "viewer"`) {
			t.Errorf("whoami -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("tty", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"auth", "whoami"}, tty: true, env: []string{server, "TALONCTL_TOKEN=tok-viewer-5f1c"}})
		if r.code != 0 || !strings.Contains(r.stdout, "\x1b[") {
			t.Fatalf("exit %d, no colour on a terminal:\n%s%s", r.code, r.stdout, r.stderr)
		}
		golden(t, "auth-whoami-viewer-tty", strings.ReplaceAll(r.stdout, e.url, "http://ADMIN"))
		r = talonctl(t, run{args: []string{"__complete", "auth", "can-i", ""}, env: []string{server}})
		if !strings.HasPrefix(r.stdout, "read\nmetrics\ncordon\nuncordon\ndrain\nwarm\nfree\ndebug\n") {
			t.Errorf("can-i completes %q", r.stdout)
		}
	})
	t.Run("metrics-not-exposed", func(t *testing.T) {
		e := startEnv(t, envOptions{scoped: authTokens})
		r := talonctl(t, run{args: []string{"auth", "can-i", "metrics"}, env: []string{"TALONCTL_SERVER=" + e.url, "TALONCTL_TOKEN=tok-admin-0e88"}})
		if r.code != cli.ExitFailure || r.stderr != "admin on coord-a: route metrics is not exposed on this listener\n" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, args := range [][]string{{"auth", "whoami"}, {"auth", "can-i", "read"}} {
			r := talonctl(t, run{args: args, env: []string{server, "TALONCTL_TOKEN=tok-wrong"}})
			if r.code != cli.ExitAuthRejected {
				t.Errorf("%v with a wrong token: exit %d, stderr %s", args, r.code, r.stderr)
			}
		}
		r := talonctl(t, run{args: []string{"auth", "can-i", "delete"}, env: []string{server}})
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, `VERB "delete": must be one of read, metrics, cordon, uncordon, drain, warm, free, debug`) {
			t.Errorf("unknown verb: exit %d, stderr %s", r.code, r.stderr)
		}
	})
}
