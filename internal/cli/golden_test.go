package cli_test

import (
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli"
)

// TestGolden runs every read command against a real coordinator admin
// handler and compares stdout with testdata/*.golden, on a terminal (with
// colour) and piped.
func TestGolden(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	inc := e.coordIncarnation(t)
	server := "TALONCTL_SERVER=" + e.url
	tests := []struct {
		name string
		args []string
		tty  bool
		env  []string
	}{
		{"cluster-status", []string{"cluster", "status"}, false, nil},
		{"cluster-status-tty", []string{"cluster", "status"}, true, nil},
		{"cluster-status-json", []string{"cluster", "status", "-o", "json"}, false, nil},
		{"cluster-status-yaml", []string{"cluster", "status", "-o", "yaml"}, false, nil},

		{"nodes-list", []string{"nodes", "list"}, false, nil},
		{"nodes-list-tty", []string{"nodes", "list"}, true, nil},
		{"nodes-list-tty-no-color", []string{"nodes", "list"}, true, []string{"NO_COLOR=1"}},
		{"nodes-list-wide", []string{"nodes", "list", "-o", "wide"}, false, nil},
		{"nodes-list-wide-tty", []string{"nodes", "list", "-o", "wide"}, true, nil},
		{"nodes-list-json", []string{"nodes", "list", "--role", "worker", "-o", "json"}, false, nil},
		{"nodes-list-yaml", []string{"nodes", "list", "--role", "worker", "-o", "yaml"}, false, nil},
		{"nodes-list-name", []string{"nodes", "list", "-o", "name"}, false, nil},
		{"nodes-list-name-tty", []string{"nodes", "list", "-o", "name"}, true, nil},
		{"nodes-list-no-headers", []string{"nodes", "list", "--no-headers"}, false, nil},
		{"nodes-list-sort-age", []string{"nodes", "list", "--sort-by", "age"}, true, nil},
		{"nodes-list-sort-hit-ratio", []string{"nodes", "list", "--sort-by", "hit-ratio", "-o", "wide"}, false, nil},
		{"nodes-list-filtered", []string{"nodes", "list", "--role", "worker", "--health", "healthy", "--ready", "-l", "zone=a"}, false, nil},
		{"nodes-list-not-ready", []string{"nodes", "list", "--ready=false", "-o", "name"}, false, nil},

		// Label selectors: every form of the Kubernetes syntax, evaluated by the server.
		{"nodes-list-selector-equals", []string{"nodes", "list", "-l", "zone=a", "-o", "name"}, false, nil},
		{"nodes-list-selector-double-equals", []string{"nodes", "list", "-l", "zone==b", "-o", "name"}, false, nil},
		{"nodes-list-selector-not-equals", []string{"nodes", "list", "-l", "zone!=a", "-o", "name"}, false, nil},
		{"nodes-list-selector-in", []string{"nodes", "list", "-l", "zone in (b,c)"}, false, nil},
		{"nodes-list-selector-notin", []string{"nodes", "list", "-l", "zone notin (a)", "-o", "name"}, false, nil},
		{"nodes-list-selector-exists", []string{"nodes", "list", "-l", "tier", "-o", "name"}, false, nil},
		{"nodes-list-selector-not-exists", []string{"nodes", "list", "--selector", "!tier", "-o", "name"}, false, nil},
		{"nodes-list-selector-comma", []string{"nodes", "list", "-l", "zone in (a,b),!tier", "-l", "zone!=b", "-o", "name"}, false, nil},
		{"nodes-list-selector-json", []string{"nodes", "list", "-l", "tier=ssd", "-o", "json"}, false, nil},

		// Field selectors, applied by talonctl.
		{"nodes-list-field-role", []string{"nodes", "list", "--field-selector", "role=worker,health!=healthy"}, false, nil},
		{"nodes-list-field-ready", []string{"nodes", "list", "--field-selector", "ready==false", "-o", "name"}, false, nil},
		{"nodes-list-field-version-node", []string{"nodes", "list", "--field-selector", "version=1.4.0,nodeId!=w-5", "-o", "name"}, false, nil},
		{"nodes-list-field-address-json", []string{"nodes", "list", "--field-selector", "address=w-2.data.test:7500", "-o", "json"}, false, nil},
		{"nodes-list-field-and-label", []string{"nodes", "list", "--field-selector", "health=healthy", "-l", "zone=a", "-o", "custom-columns=NODE:.nodeId,HEALTH:.health,ZONE:.labels.zone"}, false, nil},

		// --sort-by with a leading -: the key's order reversed.
		{"nodes-list-sort-name-desc", []string{"nodes", "list", "--sort-by=-name"}, false, nil},
		{"nodes-list-sort-capacity-desc", []string{"nodes", "list", "--sort-by", "-capacity", "-o", "wide"}, false, nil},
		{"nodes-list-sort-age-desc-name", []string{"nodes", "list", "--sort-by=-age", "-o", "name"}, false, nil},

		{"nodes-list-jsonpath", []string{"nodes", "list", "-o", "jsonpath={.items[*].nodeId}"}, false, nil},
		{"nodes-list-jsonpath-range", []string{"nodes", "list", "--sort-by", "age", "-o", `jsonpath={range .items[*]}{.nodeId}{"\t"}{.labels.zone}{"\t"}{.heartbeatAgeMs}{"\n"}{end}`}, false, nil},
		{"nodes-list-jsonpath-file", []string{"nodes", "list", "-o", "jsonpath-file=testdata/resident.jsonpath"}, false, nil},
		{"nodes-list-go-template", []string{"nodes", "list", "--role", "worker", "-o", `go-template={{range .items}}{{.nodeId}}: {{index .labels "zone"}}{{"\n"}}{{end}}schema {{.schemaVersion}}, stale {{.stale}}{{"\n"}}`}, false, nil},
		{"nodes-list-go-template-file", []string{"nodes", "list", "-o", "go-template-file=testdata/nodes.tmpl"}, false, nil},
		{"nodes-list-custom-columns", []string{"nodes", "list", "-o", "custom-columns=NODE:.nodeId,ZONE:.labels.zone,TIER:.labels.tier,HITS:.counters.hitsTotal"}, false, nil},
		{"nodes-list-custom-columns-no-headers", []string{"nodes", "list", "--no-headers", "-o", "custom-columns=NODE:{.nodeId},ADDR:address"}, false, nil},
		{"nodes-list-custom-columns-file", []string{"nodes", "list", "--sort-by", "health", "-o", "custom-columns-file=testdata/columns.txt"}, false, nil},
		{"nodes-get-jsonpath", []string{"nodes", "get", "w-1", "-o", "jsonpath={.node.labels}"}, false, nil},
		{"nodes-get-custom-columns", []string{"nodes", "get", "w-3", "-o", "custom-columns=NODE:.nodeId,VERSION:.version,HEALTH:.health"}, false, nil},
		{"nodes-get-go-template", []string{"nodes", "get", "w-2", "-o", `go-template={{.node.nodeId}} observed {{.observedAtUnixMs}}{{"\n"}}`}, false, nil},

		{"nodes-get", []string{"nodes", "get", "w-1"}, false, nil},
		{"nodes-get-tty", []string{"nodes", "get", "w-1"}, true, nil},
		{"nodes-get-wide", []string{"nodes", "get", "w-1", "-o", "wide"}, false, nil},
		{"nodes-get-wide-tty", []string{"nodes", "get", "w-1", "-o", "wide"}, true, nil},
		{"nodes-get-json", []string{"nodes", "get", "w-1", "-o", "json"}, false, nil},
		{"nodes-get-yaml", []string{"nodes", "get", "w-1", "-o", "yaml"}, false, nil},
		{"nodes-get-name", []string{"nodes", "get", "w-1", "-o", "name"}, false, nil},

		// Several IDs: one table, one list object, in the order given.
		{"nodes-get-several", []string{"nodes", "get", "w-3", "w-1", "coord-a", "w-3"}, false, nil},
		{"nodes-get-several-wide-tty", []string{"nodes", "get", "w-2", "w-4", "-o", "wide"}, true, nil},
		{"nodes-get-several-json", []string{"nodes", "get", "w-2", "w-1", "-o", "json"}, false, nil},
		{"nodes-get-several-yaml", []string{"nodes", "get", "w-4", "w-5", "-o", "yaml"}, false, nil},
		{"nodes-get-several-name", []string{"nodes", "get", "w-5", "w-2", "-o", "name"}, false, nil},
		{"nodes-get-several-jsonpath", []string{"nodes", "get", "w-1", "w-2", "-o", "jsonpath={.items[*].address}"}, false, nil},
		{"nodes-get-several-custom-columns", []string{"nodes", "get", "w-1", "w-3", "-o", "custom-columns=NODE:.nodeId,ZONE:.labels.zone"}, false, nil},

		{"placement-explain", []string{"placement", "explain", "objects/a.parquet#0", "--replicas", "2"}, false, nil},
		{"placement-explain-tty", []string{"placement", "explain", "objects/a.parquet#0", "--replicas", "2"}, true, nil},
		{"placement-explain-json", []string{"placement", "explain", "objects/a.parquet#0", "--replicas", "2", "-o", "json"}, false, nil},
		{"placement-explain-yaml", []string{"placement", "explain", "objects/a.parquet#0", "-o", "yaml"}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, tty: tt.tty, env: append([]string{server}, tt.env...)})
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			colored := strings.Contains(r.stdout, "\x1b[")
			if wantColor := tt.tty && tt.env == nil && !strings.Contains(tt.name, "name") && !strings.Contains(tt.name, "json") && !strings.Contains(tt.name, "yaml"); colored != wantColor {
				t.Errorf("colour in output = %v, want %v", colored, wantColor)
			}
			golden(t, tt.name, scrub(r.stdout, inc))
		})
	}
}

// TestGetSeveralMissing asks for nodes some of which do not exist: like
// kubectl get, each missing one is reported on stderr, the others are
// printed, and the exit code is 1.
func TestGetSeveralMissing(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := "TALONCTL_SERVER=" + e.url
	tests := []struct {
		name string
		args []string
	}{
		{"nodes-get-missing", []string{"nodes", "get", "w-1", "w-9", "w-2"}},
		{"nodes-get-missing-json", []string{"nodes", "get", "w-8", "w-2", "-o", "json"}},
		{"nodes-get-all-missing", []string{"nodes", "get", "w-8", "w-9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, env: []string{server}})
			if r.code != cli.ExitFailure {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", r.code, cli.ExitFailure, r.stderr)
			}
			golden(t, tt.name, "--- stdout\n"+scrub(r.stdout, "")+"--- stderr\n"+strings.ReplaceAll(r.stderr, e.url, "http://ADMIN"))
		})
	}
}
