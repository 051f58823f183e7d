// Package deptest enforces the import boundaries and the layout of
// STYLE.md and ADR 0001: the wire and model packages import nothing
// networked or stateful, the store knows no runtime, the CLI and TUI speak
// only the API and presentation code, the client library never links the
// worker, the worker never links the coordinator, heavy modules (cloud
// SDKs, gRPC, the OTLP exporters) stay in the packages that use them (as
// tailscale's deptest BadDeps keeps them out of binaries that need none),
// and production code never links test support; every package lies where
// the layout puts it.
//
// Each rule is one row of Rules or Layout. The test lists the module with
// `go list` and fails on the first forbidden edge or misplaced package;
// Check and CheckLayout are pure functions, so that the rules themselves
// are tested on made-up graphs.
package deptest

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the import path of this module.
const Module = "github.com/talonhq/talon"

// AnyPackage is the pattern that matches every package of the module.
const AnyPackage = "..."

// Rule forbids the packages matching From, except those matching Except,
// from reaching (directly or through their transitive dependencies) any
// package matching Deny but not Allow, and, when Only is set, any package
// of this module that matches none of Only. A pattern is an import path relative to the
// module ("internal/state"), which also matches its subpackages, an
// absolute path outside it ("net/http"; a trailing "/" matches a prefix:
// "k8s.io/"), or AnyPackage.
type Rule struct {
	From   []string
	Except []string
	Deny   []string
	Allow  []string
	Only   []string
	// Direct limits the rule to the packages' own imports: a dependency
	// reached through an allowed package is not a breach.
	Direct bool
	Reason string
}

// stateful are the module's packages that hold or reach cluster state or
// run a server: the store, the runtimes, the admin server, the wiring,
// the client library and the benchmarks.
var stateful = []string{"internal/state", "internal/coordinator", "internal/worker", "internal/admin", "internal/app", "internal/client", "internal/bench"}

// networked are the clients of networked systems and process-wide state
// that pure packages must not link.
var networked = []string{"go.etcd.io/", "k8s.io/client-go/", "google.golang.org/grpc", "github.com/prometheus/"}

// cloudSDKs are the cloud providers' SDKs: only the blob stores that use
// them (blob/s3, blob/gcs, blob/azure) import them, and only the wiring
// (internal/app) links those.
var cloudSDKs = []string{"cloud.google.com/", "github.com/Azure/", "github.com/aws/", "google.golang.org/api/"}

// otlpExporters are the OpenTelemetry exporters (and the SDK they export
// from): only tracing/otlp imports them, and only the wiring links it.
var otlpExporters = []string{"go.opentelemetry.io/otel/exporters/", "go.opentelemetry.io/otel/sdk"}

// ReleaseTags are the build tags talon is built and released with
// (Makefile BUILDTAGS, goreleaser.yaml). disable_grpc_modules drops what
// cloud.google.com/go/storage links only for its gRPC transport's Direct
// Connectivity; gs:// reads over the JSON API and needs none of it.
const ReleaseTags = "disable_grpc_modules"

// ReleaseDenied are what talon built with ReleaseTags must not link: xDS
// (envoyproxy's go-control-plane, cncf/xds) and the RLS balancer.
var ReleaseDenied = []string{"github.com/envoyproxy/", "github.com/cncf/xds/", "google.golang.org/grpc/xds", "google.golang.org/grpc/balancer/rls"}

// TestOnly lists the packages production code never links.
var TestOnly = []string{"internal/testsupport", "internal/testenv", "internal/state/statetest"}

// testTooling are the packages that may link test support: test support
// itself, the end-to-end tests (internal/integration/... by concern, and
// the measurements of internal/bench/integration), this package and the
// build tools.
var testTooling = append(slices.Clone(TestOnly), "internal/integration", "internal/bench/integration", "internal/deptest", "internal/tools")

// presentation is what talonctl and its top view may link of this module:
// the API (and the record and cache-job models its types convert from or
// embed), the CLI and TUI themselves, the presentation helpers, and the
// CA-file helper its TLS settings share with the servers (pki/capool,
// standard library only).
var presentation = []string{"internal/apiv1", "internal/cluster", "internal/job", "internal/cli", "tui", "internal/format", "internal/suggest", "internal/buildinfo", "internal/backoff", "internal/pki/capool"}

// Rules are Talon's import boundaries, one row per rule.
var Rules = []Rule{
	{From: []string{"internal/protocol", "internal/placement", "internal/cluster", "internal/job", "internal/apiv1"}, Deny: slices.Concat(stateful, networked),
		Reason: "the wire and model packages import nothing networked or stateful"},
	{From: []string{"internal/protocol", "internal/placement", "internal/cluster", "internal/job"}, Deny: []string{"net/http", "crypto/tls"},
		Reason: "the control codec, placement and the record and job models do no HTTP or TLS"},
	{From: []string{"internal/apiv1"}, Deny: []string{"internal/protocol", "internal/datav1"},
		Reason: "the API types are shared with talonctl and know no other wire format"},
	{From: []string{"internal/datav1"}, Deny: []string{"internal/state", "internal/coordinator", "internal/worker", "internal/admin", "internal/app"},
		Reason: "the data-path contract knows no store or server"},
	{From: []string{"internal/format"}, Deny: []string{"net", "net/", "internal/", "github.com/", "k8s.io/", "go.etcd.io/", "google.golang.org/"}, Allow: []string{"github.com/dustin/go-humanize"},
		Reason: "number formatting is pure and shared by talon, talonctl and top"},
	{From: []string{AnyPackage}, Except: []string{"internal/format"}, Deny: []string{"github.com/dustin/go-humanize"}, Direct: true,
		Reason: "sizes are written and read through internal/format only"},
	{From: []string{"internal/state"}, Deny: []string{"internal/coordinator", "internal/worker", "internal/admin", "internal/app", "internal/client", "internal/bench"},
		Reason: "the store knows no runtime: state never imports coordinator, worker, admin or app"},
	{From: []string{"internal/cli", "cmd/talonctl"}, Only: append(slices.Clone(presentation), "internal/placement"),
		Reason: "talonctl speaks only /api/v1 and presentation code (and the pure HRW of internal/placement, which placement simulate runs as the coordinators do: no I/O, no network)"},
	{From: []string{"tui"}, Only: presentation,
		Reason: "the TUI renders API data only"},
	{From: []string{"cmd/talonctl"}, Deny: []string{"github.com/charmbracelet/bubbletea", "github.com/charmbracelet/lipgloss", "github.com/charmbracelet/bubbles", "github.com/muesli/termenv"},
		Reason: "talonctl never queries the terminal unless top runs: bubbletea v1 did in its init (5 s on a terminal that does not answer); use charm.land/*/v2"},
	{From: []string{"internal/client"}, Deny: []string{"internal/worker", "internal/coordinator", "internal/state", "internal/admin", "internal/app"},
		Reason: "the client library links neither runtime"},
	{From: []string{"internal/worker"}, Deny: []string{"internal/coordinator", "internal/state", "internal/admin", "internal/app"},
		Reason: "a worker reaches the cluster only through coordinators"},
	{From: []string{"internal/membership"}, Deny: slices.Concat(stateful, networked, []string{"internal/protocol", "net", "net/"}),
		Reason: "the self-registration state machine is shared by both runtimes: its write is injected, it reaches no store, server or network"},
	{From: []string{"internal/pki"}, Deny: []string{"internal/state", "internal/coordinator", "internal/worker", "internal/admin", "internal/protocol", "net/http"},
		Reason: "TLS credentials know no server"},
	{From: []string{"internal/datav1", "internal/client", "internal/cli", "tui", "cmd/talonctl"}, Deny: slices.Concat(cloudSDKs, []string{"google.golang.org/grpc"}, otlpExporters),
		Reason: "heavy modules stay where they are used: the data-path contract, the client and talonctl link no cloud SDK, gRPC or OTLP exporter"},
	{From: []string{"internal/coordinator", "internal/worker"}, Deny: otlpExporters,
		Reason: "the runtimes take a trace.TracerProvider: the OTLP exporters link only where app sets up tracing"},
	{From: []string{AnyPackage}, Except: slices.Concat(testTooling, []string{"internal/blob/s3", "internal/blob/gcs", "internal/blob/azure"}), Deny: cloudSDKs, Direct: true,
		Reason: "a cloud SDK is imported only by its blob store (blob/s3, blob/gcs, blob/azure), which only app wires in"},
	{From: []string{AnyPackage}, Except: slices.Concat(testTooling, []string{"internal/tracing/otlp"}), Deny: otlpExporters, Direct: true,
		Reason: "the OTLP exporters are imported only by tracing/otlp, which only app wires in"},
	{From: []string{AnyPackage}, Except: testTooling, Deny: TestOnly,
		Reason: "production code never links test support"},
}

// matches reports whether import path p matches pattern (see Rule).
func matches(p, pattern string) bool {
	if pattern == AnyPackage {
		return p == Module || strings.HasPrefix(p, Module+"/")
	}
	if first, _, _ := strings.Cut(pattern, "/"); slices.Contains(moduleRoots, first) {
		pattern = Module + "/" + pattern
	}
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(p, pattern)
	}
	return p == pattern || strings.HasPrefix(p, pattern+"/")
}

func matchesAny(p string, patterns []string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return matches(p, pat) })
}

// applies reports whether r covers package p.
func (r *Rule) applies(p string) bool {
	return matchesAny(p, r.From) && !matchesAny(p, r.Except)
}

// forbids reports whether r forbids a package it covers to reach d.
func (r *Rule) forbids(d string) bool {
	if matchesAny(d, r.Deny) && !matchesAny(d, r.Allow) {
		return true
	}
	return r.Only != nil && matches(d, AnyPackage) && !matchesAny(d, r.Only)
}

// Graph is the module as Check sees it: for each non-test package of the
// module, its transitive dependencies (Deps) and its own imports (Imports).
type Graph struct {
	Deps, Imports map[string][]string
}

// Check returns one line per forbidden edge of g, in the order of the
// packages, then of Rules, then of the dependencies.
func Check(g Graph) []string {
	deps := g.Deps
	var out []string
	pkgs := make([]string, 0, len(deps))
	for p := range deps {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		for i := range Rules {
			r := &Rules[i]
			if !r.applies(p) {
				continue
			}
			reach := deps[p]
			if r.Direct {
				reach = g.Imports[p]
			}
			for _, d := range reach {
				if r.forbids(d) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p, d, r.Reason))
				}
			}
		}
	}
	return out
}

// Package is what CheckLayout knows of one non-test package.
type Package struct {
	Path  string   // import path
	Name  string   // package name
	Files []string // non-test Go files, base names
}

// LayoutRule is one rule of the layout: Broken reports whether p breaks
// it.
type LayoutRule struct {
	Reason string
	Broken func(p Package) bool
}

// moduleRoots are the first elements of the patterns relative to the
// module.
var moduleRoots = []string{"internal", "cmd", "tui", "deploy"}

// roots are where packages may live (STYLE.md "Layout"): the two
// binaries, the internal packages, the TUI and the deployment tests.
var roots = []string{"cmd/talon", "cmd/talonctl", "internal/", "tui", "deploy"}

// Layout is the module's layout, one row per rule.
var Layout = []LayoutRule{
	{Reason: "a package lives under cmd/talon, cmd/talonctl, internal/, tui or deploy", Broken: outsideRoots},
	{Reason: "cmd/ holds main only: package main in one main.go, logic in internal/", Broken: cmdWithLogic},
	{Reason: "no util, common or helpers packages", Broken: grabBagName},
	{Reason: "a package of several files states its invariants in doc.go", Broken: severalFilesNoDoc},
}

func outsideRoots(p Package) bool { return !matchesAny(p.Path, roots) }

func cmdWithLogic(p Package) bool {
	return matchesAny(p.Path, []string{"cmd/talon", "cmd/talonctl"}) && (p.Name != "main" || !slices.Equal(p.Files, []string{"main.go"}))
}

func grabBagName(p Package) bool {
	return slices.Contains([]string{"util", "utils", "common", "helpers", "misc"}, p.Name)
}

func severalFilesNoDoc(p Package) bool {
	return len(p.Files) > 1 && !slices.Contains(p.Files, "doc.go")
}

// CheckLayout returns one line per package that breaks a row of Layout,
// in the order of pkgs, then of Layout.
func CheckLayout(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range Layout {
			if r.Broken(p) {
				out = append(out, fmt.Sprintf("%s (package %s, files %s): %s", p.Path, p.Name, strings.Join(p.Files, " "), r.Reason))
			}
		}
	}
	return out
}
