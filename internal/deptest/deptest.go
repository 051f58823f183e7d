// Package deptest enforces the import boundaries of STYLE.md and ADR 0001:
// the wire codecs know no store or server, the CLI and TUI speak only the
// API, the client library never links the worker, and production code
// never links test support. Its test runs `go list` over the module and
// fails on the first forbidden edge; Check is a pure function so that the
// rules themselves are tested on a made-up graph.
package deptest

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the import path of this module.
const Module = "github.com/talonhq/talon"

// Rule forbids packages matching From (and their transitive dependencies)
// from reaching any package matching one of Deny. A pattern is an import
// path relative to the module ("internal/state"), which also matches its
// subpackages, or an absolute path outside it ("net/http", "k8s.io/").
type Rule struct {
	From   string
	Deny   []string
	Reason string
}

// Rules are Talon's boundaries.
var Rules = []Rule{
	{From: "internal/protocol", Deny: []string{"internal/state", "internal/coordinator", "internal/worker", "internal/admin"},
		Reason: "the control codec knows no store or server"},
	{From: "internal/datav1", Deny: []string{"internal/state", "internal/coordinator", "internal/worker", "internal/admin"},
		Reason: "the data-path contract knows no store or server"},
	{From: "internal/apiv1", Deny: []string{"internal/state", "internal/protocol", "internal/coordinator", "internal/worker", "internal/admin"},
		Reason: "the API types are shared with talonctl"},
	{From: "internal/placement", Deny: []string{"net/http", "crypto/tls", "go.etcd.io/", "k8s.io/", "google.golang.org/grpc", "internal/state"},
		Reason: "placement is pure functions"},
	{From: "internal/cluster", Deny: []string{"net/http", "go.etcd.io/", "k8s.io/", "google.golang.org/grpc", "internal/state"},
		Reason: "the record model does no I/O"},
	{From: "internal/format", Deny: []string{"net", "net/", "internal/", "github.com/", "k8s.io/", "go.etcd.io/", "google.golang.org/"},
		Reason: "number formatting is pure and shared by talonctl and top"},
	{From: "internal/cli", Deny: []string{"internal/coordinator", "internal/state", "internal/admin", "internal/protocol", "internal/worker"},
		Reason: "talonctl speaks only /api/v1"},
	{From: "tui", Deny: []string{"internal/coordinator", "internal/state", "internal/admin", "internal/protocol", "internal/worker"},
		Reason: "the TUI renders API data only"},
	{From: "cmd/talonctl", Deny: []string{"internal/coordinator", "internal/state", "internal/admin", "internal/protocol", "internal/worker"},
		Reason: "talonctl speaks only /api/v1"},
	{From: "cmd/talonctl", Deny: []string{"github.com/charmbracelet/bubbletea", "github.com/charmbracelet/lipgloss", "github.com/charmbracelet/bubbles", "github.com/muesli/termenv"},
		Reason: "talonctl never queries the terminal unless top runs: bubbletea v1 did in its init (5 s on a terminal that does not answer); use charm.land/*/v2"},
	{From: "internal/client", Deny: []string{"internal/worker", "internal/coordinator", "internal/state"},
		Reason: "the client library links neither runtime"},
	{From: "internal/pki", Deny: []string{"internal/state", "internal/coordinator", "internal/worker", "internal/admin", "internal/protocol", "net/http"},
		Reason: "TLS credentials know no server"},
	{From: "internal/worker", Deny: []string{"internal/coordinator", "internal/state"},
		Reason: "a worker reaches the cluster only through coordinators"},
}

// TestOnly lists the packages production code never links.
var TestOnly = []string{"internal/testsupport", "internal/testenv"}

// matches reports whether import path p matches pattern (see Rule).
func matches(p, pattern string) bool {
	if strings.HasPrefix(pattern, "internal/") || strings.HasPrefix(pattern, "cmd/") || pattern == "tui" {
		pattern = Module + "/" + pattern
	}
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(p, pattern)
	}
	return p == pattern || strings.HasPrefix(p, pattern+"/")
}

// Check returns one line per forbidden edge in deps, a map from each
// non-test package of the module to its transitive dependencies. Packages
// that match neither a rule nor a production root are ignored; test-only
// packages (TestOnly, internal/integration, internal/deptest, tools) may
// import anything.
func Check(deps map[string][]string) []string {
	var out []string
	pkgs := make([]string, 0, len(deps))
	for p := range deps {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		for _, r := range Rules {
			if !matches(p, r.From) {
				continue
			}
			for _, d := range deps[p] {
				for _, deny := range r.Deny {
					if matches(d, deny) {
						out = append(out, fmt.Sprintf("%s imports %s: %s", p, d, r.Reason))
					}
				}
			}
		}
		if testSupportAllowed(p) {
			continue
		}
		for _, d := range deps[p] {
			for _, t := range TestOnly {
				if matches(d, t) {
					out = append(out, fmt.Sprintf("%s imports %s: production code never links test support", p, d))
				}
			}
		}
	}
	return out
}

func testSupportAllowed(p string) bool {
	for _, t := range append(slices.Clone(TestOnly), "internal/integration", "internal/deptest", "internal/tools") {
		if matches(p, t) {
			return true
		}
	}
	return false
}
