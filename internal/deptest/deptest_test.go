package deptest

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// listModule runs `go list` over the module: every non-test package with
// its name, non-test Go files and transitive dependencies.
func listModule(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{.Name}}|{{join .GoFiles " "}}|{{join .Deps " "}}|{{join .Imports " "}}`, Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 {
			t.Fatalf("go list line %q: want 5 fields", line)
		}
		pkgs = append(pkgs, listed{Package{Path: f[0], Name: f[1], Files: strings.Fields(f[2])}, strings.Fields(f[3]), strings.Fields(f[4])})
	}
	return pkgs
}

type listed struct {
	Package
	deps, imports []string
}

// TestModuleBoundaries lists every package of the module with its
// transitive dependencies and applies Rules.
func TestModuleBoundaries(t *testing.T) {
	deps, imports := map[string][]string{}, map[string][]string{}
	for _, p := range listModule(t) {
		deps[p.Path], imports[p.Path] = p.deps, p.imports
	}
	for _, must := range []string{"internal/protocol", "internal/state", "internal/cli/nodes/list", "tui", "cmd/talonctl", "internal/client", "internal/worker", "internal/coordinator"} {
		if _, ok := deps[Module+"/"+must]; !ok {
			t.Fatalf("go list did not list %s; the check would pass vacuously", must)
		}
	}
	for _, v := range Check(Graph{Deps: deps, Imports: imports}) {
		t.Error(v)
	}
}

// TestReleaseBuildLeavesOutXDS: talon as the Makefile and goreleaser
// build it (with ReleaseTags) links nothing of ReleaseDenied, and both
// pass the tags.
func TestReleaseBuildLeavesOutXDS(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", ReleaseTags, "-deps", Module+"/cmd/talon").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "cloud.google.com/go/storage") {
		t.Fatal("talon does not link cloud.google.com/go/storage: the check would pass vacuously")
	}
	for _, d := range deps {
		if matchesAny(d, ReleaseDenied) {
			t.Errorf("talon built with -tags %s links %s", ReleaseTags, d)
		}
	}
	for file, want := range map[string][]string{
		"../../Makefile":        {"BUILDTAGS := " + ReleaseTags, "build -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o bin/talon ", "build -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o dist/image-bin/"},
		"../../goreleaser.yaml": {"flags: [-trimpath, -tags=" + ReleaseTags + "]"},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s does not build talon with the release tags: no %q", file, w)
			}
		}
	}
	if b, _ := os.ReadFile("../../goreleaser.yaml"); strings.Count(string(b), "-tags="+ReleaseTags) != 2 {
		t.Errorf("goreleaser.yaml: want -tags=%s on the talon build and the ko image", ReleaseTags)
	}
}

// TestModuleLayout applies Layout to every package of the module.
func TestModuleLayout(t *testing.T) {
	var pkgs []Package
	for _, p := range listModule(t) {
		pkgs = append(pkgs, p.Package)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list listed %d packages; the check would pass vacuously", len(pkgs))
	}
	for _, v := range CheckLayout(pkgs) {
		t.Error(v)
	}
}

// TestCheckFindsForbiddenImports adds one forbidden edge to a clean graph
// per row, and expects exactly that edge reported, with its rule's reason.
func TestCheckFindsForbiddenImports(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	clean := map[string][]string{
		m("internal/protocol"):               {m("internal/cluster"), "net", "encoding/binary"},
		m("internal/placement"):              {m("internal/cluster"), "github.com/zeebo/xxh3"},
		m("internal/cluster"):                {"net", "net/netip", "encoding/json"},
		m("internal/apiv1"):                  {m("internal/cluster"), "net/http", "crypto/tls", "k8s.io/apimachinery/pkg/labels"},
		m("internal/datav1"):                 {m("internal/placement"), m("internal/pki"), "net/http"},
		m("internal/format"):                 {"fmt", "math", "github.com/dustin/go-humanize"},
		m("internal/state"):                  {m("internal/cluster")},
		m("internal/state/etcd"):             {m("internal/state"), m("internal/backoff"), "go.etcd.io/etcd/client/v3"},
		m("internal/cli/nodes"):              {m("internal/apiv1"), m("internal/cli/cmdutil"), m("internal/format"), "net/http"},
		m("internal/cli/placement/simulate"): {m("internal/apiv1"), m("internal/placement"), m("internal/cluster"), "github.com/zeebo/xxh3"},
		m("tui"):                             {m("internal/apiv1"), m("internal/format"), m("internal/backoff"), "charm.land/bubbletea/v2"},
		m("cmd/talon"):                       {m("internal/app"), m("internal/coordinator")},
		m("cmd/talonctl"):                    {m("internal/cli"), m("tui"), m("internal/buildinfo"), "charm.land/bubbletea/v2", "charm.land/lipgloss/v2"},
		m("internal/client"):                 {m("internal/protocol"), m("internal/datav1"), m("internal/placement")},
		m("internal/worker"):                 {m("internal/client"), m("internal/protocol"), m("internal/datav1")},
		m("internal/pki"):                    {"crypto/tls", "crypto/x509"},
		m("internal/membership"):             {m("internal/backoff"), "log/slog"},
		m("internal/coordinator"):            {m("internal/state"), m("internal/protocol")},
		m("internal/testsupport/coordtest"):  {m("internal/coordinator"), m("internal/testsupport")},
		m("internal/config"):                 {m("internal/format"), "github.com/dustin/go-humanize"},
		m("internal/integration"):            {m("internal/testenv"), m("internal/testsupport")},
		m("internal/testsupport/talontest"):  {m("internal/testenv"), m("internal/testsupport"), m("internal/apiv1"), m("internal/client")},
		m("internal/integration/faults"):     {m("internal/testsupport/talontest")},
		m("internal/bench/integration"):      {m("internal/testsupport/talontest"), m("internal/bench/harness")},
		m("internal/blob/s3"):                {m("internal/blob"), "github.com/aws/aws-sdk-go-v2/service/s3"},
		m("internal/tracing/otlp"):           {"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc", "go.opentelemetry.io/otel/sdk/trace", "google.golang.org/grpc"},
		m("internal/app"): {m("internal/blob/s3"), m("internal/tracing/otlp"), "github.com/aws/aws-sdk-go-v2/service/s3",
			"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc", "go.opentelemetry.io/otel/sdk/trace", "google.golang.org/grpc"},
	}
	// In the made-up graph every dependency is a direct import too, but
	// config's go-humanize, which it reaches through format.
	cleanImports := copyGraph(clean)
	cleanImports[m("internal/config")] = []string{m("internal/format")}
	cleanImports[m("internal/app")] = []string{m("internal/blob/s3"), m("internal/tracing/otlp")}
	if v := Check(Graph{Deps: clean, Imports: cleanImports}); len(v) != 0 {
		t.Fatalf("clean graph reported: %q", v)
	}
	type edge struct{ from, dep, want string }
	tests := []edge{
		// The wire and model packages import nothing networked or stateful.
		{"internal/protocol", m("internal/state"), "nothing networked or stateful"},
		{"internal/protocol", m("internal/coordinator"), "nothing networked or stateful"},
		{"internal/placement", "go.etcd.io/etcd/client/v3", "nothing networked or stateful"},
		{"internal/placement", m("internal/state/memory"), "nothing networked or stateful"},
		{"internal/cluster", "k8s.io/client-go/kubernetes", "nothing networked or stateful"},
		{"internal/cluster", "github.com/prometheus/client_golang/prometheus", "nothing networked or stateful"},
		{"internal/apiv1", m("internal/admin"), "nothing networked or stateful"},
		{"internal/apiv1", "google.golang.org/grpc", "nothing networked or stateful"},
		{"internal/placement", "net/http", "no HTTP or TLS"},
		{"internal/protocol", "crypto/tls", "no HTTP or TLS"},
		{"internal/apiv1", m("internal/protocol"), "know no other wire format"},
		{"internal/datav1", m("internal/worker/cache"), "data-path contract knows no store"},
		{"internal/format", "github.com/charmbracelet/x/ansi", "number formatting is pure"},
		{"internal/format", "net/http", "number formatting is pure"},
		{"internal/config", "github.com/dustin/go-humanize", "through internal/format only"},
		// The store knows no runtime.
		{"internal/state", m("internal/coordinator"), "state never imports coordinator"},
		{"internal/state/etcd", m("internal/coordinator"), "state never imports coordinator"},
		{"internal/state", m("internal/worker"), "state never imports coordinator, worker"},
		{"internal/state/etcd", m("internal/admin"), "state never imports coordinator, worker, admin"},
		{"internal/state", m("internal/app"), "admin or app"},
		// talonctl and top: /api/v1 and presentation only.
		{"internal/cli/nodes", m("internal/protocol"), "talonctl speaks only"},
		{"internal/cli/nodes", m("internal/state/etcd"), "talonctl speaks only"},
		{"internal/cli/nodes", m("internal/client"), "talonctl speaks only"},
		{"cmd/talonctl", m("internal/config"), "talonctl speaks only"},
		{"tui", m("internal/admin"), "the TUI renders"},
		{"tui", m("internal/placement"), "the TUI renders"},
		{"cmd/talonctl", "github.com/charmbracelet/bubbletea", "never queries the terminal"},
		{"cmd/talonctl", "github.com/muesli/termenv", "never queries the terminal"},
		// The runtimes' boundaries.
		{"internal/client", m("internal/worker/dataserver"), "links neither runtime"},
		{"internal/client", m("internal/coordinator"), "links neither runtime"},
		{"internal/worker", m("internal/coordinator"), "only through coordinators"},
		{"internal/worker", m("internal/state/kube"), "only through coordinators"},
		{"internal/pki", "net/http", "TLS credentials know no server"},
		{"internal/membership", m("internal/state"), "self-registration state machine"},
		{"internal/membership", m("internal/protocol"), "self-registration state machine"},
		{"internal/membership", "net", "self-registration state machine"},
		// Heavy modules stay where they are used (more in transitive).
		{"cmd/talonctl", "google.golang.org/grpc", "link no cloud SDK, gRPC or OTLP exporter"},
		{"internal/worker", "github.com/aws/aws-sdk-go-v2/service/s3", "imported only by its blob store"},
		{"internal/blob", "cloud.google.com/go/storage", "imported only by its blob store"},
		{"internal/app", "go.opentelemetry.io/otel/exporters/otlp/otlptrace", "imported only by tracing/otlp"},
		// Test support.
		{"internal/coordinator", m("internal/testsupport"), "never links test support"},
		{"internal/state/etcd", m("internal/state/statetest"), "never links test support"},
		{"cmd/talon", m("internal/testenv"), "never links test support"},
		{"internal/worker", m("internal/testsupport/talontest"), "never links test support"},
		{"internal/bench", m("internal/testsupport/talontest"), "never links test support"},
	}
	// transitive are edges reached through another package, not imported
	// by from itself.
	transitive := []edge{
		{"internal/datav1", "cloud.google.com/go/storage", "link no cloud SDK, gRPC or OTLP exporter"},
		{"internal/client", "github.com/aws/aws-sdk-go-v2/service/s3", "link no cloud SDK, gRPC or OTLP exporter"},
		{"internal/cli/nodes", "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob", "link no cloud SDK, gRPC or OTLP exporter"},
		{"tui", "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp", "link no cloud SDK, gRPC or OTLP exporter"},
		{"internal/coordinator", "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc", "runtimes take a trace.TracerProvider"},
		{"internal/worker", "go.opentelemetry.io/otel/sdk/trace", "runtimes take a trace.TracerProvider"},
	}
	exercised := map[string]bool{}
	run := func(tt edge, direct bool) {
		t.Run(tt.from+"->"+tt.dep, func(t *testing.T) {
			g, im := copyGraph(clean), copyGraph(cleanImports)
			g[m(tt.from)] = append(g[m(tt.from)], tt.dep)
			if direct {
				im[m(tt.from)] = append(im[m(tt.from)], tt.dep)
			}
			v := Check(Graph{Deps: g, Imports: im})
			if len(v) != 1 || !strings.Contains(v[0], tt.dep) || !strings.Contains(v[0], tt.want) {
				t.Fatalf("Check = %q, want one violation naming %s (%s)", v, tt.dep, tt.want)
			}
			for _, r := range Rules {
				if strings.HasSuffix(v[0], ": "+r.Reason) {
					exercised[r.Reason] = true
				}
			}
		})
	}
	for _, tt := range tests {
		run(tt, true)
	}
	for _, tt := range transitive {
		run(tt, false)
	}
	for _, r := range Rules {
		if !exercised[r.Reason] {
			t.Errorf("no case breaks the rule %q", r.Reason)
		}
	}
}

// copyGraph copies g deeply enough that appending to a list of the copy
// leaves g alone.
func copyGraph(g map[string][]string) map[string][]string {
	out := make(map[string][]string, len(g))
	for k, v := range g {
		out[k] = slices.Clone(v)
	}
	return out
}

func TestCheckLayout(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	clean := []Package{
		{Path: m("cmd/talon"), Name: "main", Files: []string{"main.go"}},
		{Path: m("cmd/talonctl"), Name: "main", Files: []string{"main.go"}},
		{Path: m("internal/format"), Name: "format", Files: []string{"format.go"}},
		{Path: m("internal/client"), Name: "client", Files: []string{"client.go", "doc.go", "objects.go"}},
		{Path: m("internal/tools/image"), Name: "main", Files: []string{"build.go", "doc.go", "main.go"}},
		{Path: m("tui"), Name: "tui", Files: []string{"doc.go", "model.go"}},
		{Path: m("deploy"), Name: "deploy", Files: []string{"doc.go"}},
	}
	if v := CheckLayout(clean); len(v) != 0 {
		t.Fatalf("clean layout reported: %q", v)
	}
	tests := []struct {
		name string
		pkg  Package
		want string
	}{
		{"a package at the top", Package{Path: m("pkg/cache"), Name: "cache", Files: []string{"cache.go"}}, "lives under cmd/talon"},
		{"another binary", Package{Path: m("cmd/tool"), Name: "main", Files: []string{"main.go"}}, "lives under cmd/talon"},
		{"the module root", Package{Path: Module, Name: "talon", Files: []string{"talon.go"}}, "lives under cmd/talon"},
		{"logic beside main", Package{Path: m("cmd/talon"), Name: "main", Files: []string{"doc.go", "main.go", "run.go"}}, "cmd/ holds main only"},
		{"a library under cmd", Package{Path: m("cmd/talonctl/flags"), Name: "flags", Files: []string{"main.go"}}, "cmd/ holds main only"},
		{"a util package", Package{Path: m("internal/util"), Name: "util", Files: []string{"util.go"}}, "no util, common or helpers"},
		{"a helpers package", Package{Path: m("internal/x/helpers"), Name: "helpers", Files: []string{"helpers.go"}}, "no util, common or helpers"},
		{"several files, no doc.go", Package{Path: m("internal/client"), Name: "client", Files: []string{"client.go", "objects.go"}}, "invariants in doc.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := CheckLayout(append(append([]Package{}, clean...), tt.pkg))
			if len(v) != 1 || !strings.Contains(v[0], tt.pkg.Path) || !strings.Contains(v[0], tt.want) {
				t.Fatalf("CheckLayout = %q, want one violation naming %s (%s)", v, tt.pkg.Path, tt.want)
			}
		})
	}
}
