package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestModuleBoundaries lists every package of the module with its
// transitive dependencies and applies Rules and TestOnly.
func TestModuleBoundaries(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	for _, must := range []string{Module + "/internal/protocol", Module + "/cmd/talonctl", Module + "/internal/client"} {
		if _, ok := deps[must]; !ok {
			t.Fatalf("go list did not list %s; the check would pass vacuously", must)
		}
	}
	for _, v := range Check(deps) {
		t.Error(v)
	}
}

// TestCheckFindsForbiddenImports adds one forbidden edge of each kind to a
// clean graph and expects exactly that edge reported.
func TestCheckFindsForbiddenImports(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	clean := map[string][]string{
		m("internal/protocol"):              {m("internal/cluster"), "net", "encoding/binary"},
		m("internal/placement"):             {m("internal/cluster"), "github.com/zeebo/xxh3"},
		m("internal/cli/nodes"):             {m("internal/apiv1"), m("internal/cli/cmdutil"), "net/http"},
		m("tui"):                            {m("internal/apiv1"), "charm.land/bubbletea/v2"},
		m("cmd/talonctl"):                   {m("tui"), "charm.land/bubbletea/v2", "charm.land/lipgloss/v2"},
		m("internal/client"):                {m("internal/protocol"), m("internal/datav1")},
		m("internal/worker"):                {m("internal/client"), m("internal/protocol"), m("internal/datav1")},
		m("internal/coordinator"):           {m("internal/state"), m("internal/protocol")},
		m("internal/testsupport/coordtest"): {m("internal/coordinator"), m("internal/testsupport")},
	}
	if v := Check(clean); len(v) != 0 {
		t.Fatalf("clean graph reported: %q", v)
	}
	tests := []struct{ from, dep, want string }{
		{"internal/protocol", m("internal/state"), "the control codec knows no store"},
		{"internal/protocol", m("internal/coordinator"), "the control codec knows no store"},
		{"internal/placement", "net/http", "placement is pure"},
		{"internal/placement", "go.etcd.io/etcd/client/v3", "placement is pure"},
		{"internal/cli/nodes", m("internal/protocol"), "talonctl speaks only"},
		{"internal/cli/nodes", m("internal/state/etcd"), "talonctl speaks only"},
		{"tui", m("internal/admin"), "the TUI renders"},
		{"internal/client", m("internal/worker/dataserver"), "links neither runtime"},
		{"cmd/talonctl", "github.com/charmbracelet/bubbletea", "never queries the terminal"},
		{"cmd/talonctl", "github.com/muesli/termenv", "never queries the terminal"},
		{"internal/worker", m("internal/coordinator"), "only through coordinators"},
		{"internal/coordinator", m("internal/testsupport"), "never links test support"},
	}
	for _, tt := range tests {
		t.Run(tt.from+"->"+tt.dep, func(t *testing.T) {
			g := map[string][]string{}
			for k, v := range clean {
				g[k] = v
			}
			g[m(tt.from)] = append(append([]string{}, g[m(tt.from)]...), tt.dep)
			v := Check(g)
			if len(v) != 1 || !strings.Contains(v[0], tt.dep) || !strings.Contains(v[0], tt.want) {
				t.Fatalf("Check = %q, want one violation naming %s (%s)", v, tt.dep, tt.want)
			}
		})
	}
}
