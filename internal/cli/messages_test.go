package cli_test

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/state"
)

// TestMessages compares stderr and the exit code of the mistakes a new
// user makes with testdata/messages-*.golden: the 503 advice in terms of
// --allow-stale, a control address, https against http and http against
// https. Each server is a real one: the coordinator's admin handler, its
// control listener, and the same admin handler behind TLS.
func TestMessages(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	tlsAdmin := httptest.NewUnstartedServer(e.coord.AdminServer.Config.Handler)
	tlsAdmin.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are the point
	tlsAdmin.StartTLS()
	t.Cleanup(tlsAdmin.Close)
	httpsURL := strings.Replace(e.url, "http://", "https://", 1)
	httpToTLS := strings.Replace(tlsAdmin.URL, "https://", "http://", 1)
	control := "http://" + e.coord.ControlAddr
	scrubURLs := strings.NewReplacer(httpsURL, "https://ADMIN", e.url, "http://ADMIN", httpToTLS, "http://TLS-ADMIN", strings.Replace(tlsAdmin.URL, "http://", "https://", 1), "https://TLS-ADMIN",
		control, "http://CONTROL", e.coord.ControlAddr, "CONTROL")

	tests := []struct {
		name  string
		args  []string
		fault bool // the store fails: the coordinator answers 503
		code  int
	}{
		{"control-address", []string{"nodes", "list", "--server", control}, false, cli.ExitUnavailable},
		{"https-to-http", []string{"nodes", "list", "--server", httpsURL}, false, cli.ExitUnavailable},
		{"http-to-https", []string{"cluster", "status", "--server", httpToTLS}, false, cli.ExitUsage},
		{"version-server-down", []string{"version", "--server", control}, false, cli.ExitUnavailable},
		{"503", []string{"nodes", "list", "--server", e.url}, true, cli.ExitUnavailable},

		// Mistyped commands and flags at every level: "did you mean".
		{"suggest-command", []string{"nodez"}, false, cli.ExitUsage},
		{"suggest-verb", []string{"nodes", "lst"}, false, cli.ExitUsage},
		{"suggest-verb-prefix", []string{"placement", "expl", "k"}, false, cli.ExitUsage},
		{"suggest-config-verb", []string{"config", "use-contxt", "dev"}, false, cli.ExitUsage},
		{"suggest-global-flag", []string{"nodes", "list", "--sever", e.url}, false, cli.ExitUsage},
		{"suggest-local-flag", []string{"nodes", "get", "w-1", "--ouput", "json"}, false, cli.ExitUsage},
		{"suggest-flag-prefix", []string{"nodes", "list", "--field", "role=worker"}, false, cli.ExitUsage},
		{"suggest-root-flag", []string{"--contxt", "dev", "version"}, false, cli.ExitUsage},
		{"no-suggestion", []string{"nodes", "list", "--colour"}, false, cli.ExitUsage},
		{"no-suggestion-command", []string{"frobnicate"}, false, cli.ExitUsage},

		// Selection mistakes name the flag, the value and the rule.
		{"bad-selector", []string{"nodes", "list", "-l", "zone in (a", "--server", e.url}, false, cli.ExitUsage},
		{"bad-selector-key", []string{"nodes", "list", "-l", "Zone/x=a", "--server", e.url}, false, cli.ExitUsage},
		{"unknown-field", []string{"nodes", "list", "--field-selector", "zone=a", "--server", e.url}, false, cli.ExitUsage},
		{"bad-field-value", []string{"nodes", "list", "--field-selector", "health=fine", "--server", e.url}, false, cli.ExitUsage},
		{"bad-field-syntax", []string{"nodes", "list", "--field-selector", "role in (worker)", "--server", e.url}, false, cli.ExitUsage},
		{"bad-sort-by", []string{"nodes", "list", "--sort-by", "-size", "--server", e.url}, false, cli.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fault {
				e.store.SetFault(state.ErrUnavailable)
			}
			r := talonctl(t, run{args: tt.args})
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\nstderr:\n%s", r.code, tt.code, r.stderr)
			}
			if strings.Contains(r.stderr, "allowStale=true") {
				t.Errorf("stderr names the API parameter instead of the flag:\n%s", r.stderr)
			}
			golden(t, "messages-"+tt.name, scrubURLs.Replace(r.stderr))
		})
	}
}

// TestKubectlHabits: verb-first lines name the talonctl command (issue 38:
// they said only "unknown command"), and kubectl's resource names work.
func TestKubectlHabits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"get", "nodes"}, `try "talonctl nodes list"`},
		{[]string{"get", "no"}, `try "talonctl nodes list"`},
		{[]string{"get", "node", "w-1"}, `try "talonctl nodes get w-1"`},
		{[]string{"get", "coordinators"}, `try "talonctl coordinators list"`},
		{[]string{"describe", "node", "w-1"}, `try "talonctl nodes describe w-1"`},
		{[]string{"cordon", "w-1"}, `try "talonctl nodes cordon w-1"`},
		{[]string{"drain", "w-1"}, `try "talonctl nodes drain w-1"`},
		{[]string{"explain", "obj#0"}, `try "talonctl placement explain obj#0"`},
		{[]string{"status"}, `try "talonctl cluster status"`},
	} {
		r := talonctl(t, run{args: tc.args})
		if r.code != 2 || !strings.Contains(r.stderr, "hint: talonctl puts the noun first: "+tc.hint) {
			t.Errorf("talonctl %s: exit %d, stderr:\n%s\nwant exit 2 and %s", strings.Join(tc.args, " "), r.code, r.stderr, tc.hint)
		}
	}
	// kubectl's short name of the resource is an alias of the noun.
	if r := talonctl(t, run{args: []string{"no", "list", "--help"}}); r.code != 0 || !strings.Contains(r.stdout, "talonctl nodes list") {
		t.Errorf("talonctl no list --help: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
