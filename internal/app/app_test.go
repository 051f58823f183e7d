package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Environ: environ, Runners: Runners{
		Coordinator: func(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
			log.Info("coordinator would start", "node", cfg.NodeID, "password", cfg.Etcd.Password)
			return nil
		},
	}}
	code = Main(context.Background(), args, env)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, nil, "version", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"version", "commit", "date", "goVersion"} {
		if got[k] == "" {
			t.Fatalf("version JSON lacks %s: %s", k, out)
		}
	}
	if got["goVersion"] != runtime.Version() {
		t.Fatalf("goVersion = %q", got["goVersion"])
	}
	code, out, _ = run(t, nil, "version")
	if code != 0 || !strings.Contains(out, "commit:") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version text = %d %q", code, out)
	}
	if code, _, errOut := run(t, nil, "version", "-o", "xml"); code != ExitUsage || !strings.Contains(errOut, `"xml"`) {
		t.Fatalf("version -o xml = %d %q", code, errOut)
	}
}

func TestCoordinatorRejectsBadTiming(t *testing.T) {
	code, _, errOut := run(t, nil, "coordinator", "--node-id", "c1", "--heartbeat-interval", "20s")
	if code == 0 {
		t.Fatal("coordinator with heartbeat-interval 20s exited 0")
	}
	for _, want := range []string{"heartbeat-interval 20s", "unhealthy-after 15s"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("stderr %q does not name %q", errOut, want)
		}
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	code, _, errOut := run(t, nil, "coordinator", "--heartbeat", "5s")
	if code != ExitUsage || !strings.Contains(errOut, "--heartbeat") {
		t.Fatalf("unknown flag: exit %d, %q", code, errOut)
	}
}

func TestConfigPrintRedactsAndLogsRedact(t *testing.T) {
	const planted = "PLANTED-secret-9f8e"
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(planted), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--node-id", "c1", "--state-backend", "etcd", "--etcd-username", "u", "--etcd-password-file", pw, "--insecure-control-plane"}
	code, out, errOut := run(t, []string{"TALON_ADMIN_TOKEN=" + planted}, append([]string{"config", "print"}, args...)...)
	if code != 0 {
		t.Fatalf("config print exit %d: %s", code, errOut)
	}
	if strings.Contains(out+errOut, planted) || !strings.Contains(out, "[REDACTED]") {
		t.Fatalf("config print leaks or does not redact:\n%s", out)
	}
	if !strings.Contains(out, "etcd-username: \"u\"  # flag --etcd-username") {
		t.Fatalf("config print lacks provenance:\n%s", out)
	}
	code, _, errOut = run(t, nil, append([]string{"coordinator"}, args...)...)
	if code != 0 || strings.Contains(errOut, planted) || !strings.Contains(errOut, "coordinator would start") {
		t.Fatalf("coordinator logs: exit %d\n%s", code, errOut)
	}
}

func TestConfigValidate(t *testing.T) {
	blobs := "file://" + t.TempDir()
	if code, out, errOut := run(t, nil, "config", "validate", "worker", "--node-id", "w1", "--insecure-control-plane", "--blob-store", blobs); code != 0 || !strings.Contains(out, "worker configuration is valid") {
		t.Fatalf("validate worker = %d %q %s", code, out, errOut)
	}
	// A blob store start-up could not open fails validation too.
	if code, _, errOut := run(t, nil, "config", "validate", "worker", "--node-id", "w1", "--insecure-control-plane", "--blob-store", "file:///no/such/dir"); code != ExitUsage || !strings.Contains(errOut, "directory /no/such/dir does not exist") {
		t.Fatalf("validate worker with a missing blob directory = %d %q", code, errOut)
	}
	// A signed URL's secrets never reach a message.
	signed := "https://blobs.example/b?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=0123456789abcdef"
	if code, _, errOut := run(t, nil, "config", "validate", "worker", "--node-id", "w1", "--insecure-control-plane", "--blob-store", signed); code != ExitUsage || strings.Contains(errOut, "0123456789abcdef") || strings.Contains(errOut, "AKIAEXAMPLE") {
		t.Fatalf("validate worker with a signed blob URL = %d %q: want a usage error without the signature", code, errOut)
	}
	// An s3:// URL's parameters are checked, naming the parameter, its
	// value and the rule.
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for url, want := range map[string]string{
		"s3://b/p?region=eu-west-1&use_path_style=true": "",
		"s3://b/p?regoin=x":                             `unknown parameter "regoin"`,
		"s3://b/p?max_attempts=99":                      `max_attempts="99": must be an integer from 1 to 20`,
		"s3://key:secret@b/p":                           "must not carry credentials",
	} {
		code, _, errOut := run(t, nil, "config", "validate", "worker", "--node-id", "w1", "--insecure-control-plane", "--blob-store", url)
		_ = blobs
		if want == "" && code != 0 || want != "" && (code != ExitUsage || !strings.Contains(errOut, want)) || strings.Contains(errOut, "secret") {
			t.Errorf("validate worker --blob-store %s = %d %q, want %q", url, code, errOut, want)
		}
	}
	// Without TLS files, running without TLS must be chosen explicitly.
	if code, _, errOut := run(t, nil, "config", "validate", "worker", "--node-id", "w1"); code != ExitUsage || !strings.Contains(errOut, "insecure-control-plane=true") {
		t.Fatalf("validate worker without TLS = %d %q", code, errOut)
	}
	if code, _, errOut := run(t, []string{"TALON_LEASE_TTL=10s"}, "config", "validate", "--node-id", "c1"); code != ExitUsage || !strings.Contains(errOut, "lease-ttl 10s") {
		t.Fatalf("validate bad = %d %q", code, errOut)
	}
	if code, _, _ := run(t, nil, "config", "validate", "boss"); code != ExitUsage {
		t.Fatalf("validate boss = %d", code)
	}
}

func TestPKICommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if code, out, errOut := run(t, nil, "pki", "init", "--dir", dir); code != 0 || !strings.Contains(out, "ca.crt") {
		t.Fatalf("pki init: %d %s %s", code, out, errOut)
	}
	// A second init never replaces the CA.
	if code, _, errOut := run(t, nil, "pki", "init", "--dir", dir); code != ExitUsage || !strings.Contains(errOut, "refusing to replace a CA") {
		t.Fatalf("pki init again: %d %s", code, errOut)
	}
	code, out, errOut := run(t, nil, "pki", "issue", "--dir", dir, "--role", "worker", "--node-id", "w1", "--cluster-id", "c1")
	if code != 0 {
		t.Fatalf("pki issue: %d %s", code, errOut)
	}
	src, err := pki.Load(pki.Layout(dir, pki.Identity{Role: pki.RoleWorker, NodeID: "w1"}), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := src.Identity(); err != nil || id != (pki.Identity{Role: pki.RoleWorker, NodeID: "w1", Cluster: "c1"}) || !strings.Contains(out, "tls-cert-file: "+filepath.Join(dir, "worker-w1.crt")) {
		t.Fatalf("issued identity %v %v; output %s", id, err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--role", "admin", "--node-id", "x"}, `--role "admin"`},
		{[]string{"--role", "worker", "--node-id", ""}, "--node-id"},
		{[]string{"--role", "worker", "--node-id", "w1", "--cluster-id", "c1", "--validity", "100000h"}, "--validity"},
		{[]string{"--role", "worker", "--node-id", "w1"}, "--cluster-id: required"},
		{[]string{"--role", "worker", "--node-id", "w1", "--cluster-id", "no/slash"}, `--cluster-id`},
	} {
		code, _, errOut := run(t, nil, append([]string{"pki", "issue", "--dir", dir}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Fatalf("pki issue %v: %d %s", tc.args, code, errOut)
		}
	}
	// A worker refuses to start with another node's certificate, or
	// with its own node's certificate of another cluster.
	f := pki.Layout(dir, pki.Identity{Role: pki.RoleWorker, NodeID: "w1"})
	cfg := &config.Config{Role: cluster.RoleWorker, ClusterID: "c1", NodeID: "w2", TLS: config.TLSConfig{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}}
	if _, err := loadPlaneTLS(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "names worker/w1 but this process is worker/w2") {
		t.Fatalf("worker with another node's certificate: %v", err)
	}
	cfg.NodeID, cfg.ClusterID = "w1", "c2"
	if _, err := loadPlaneTLS(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), `bound to cluster "c1", but this process serves cluster "c2"`) {
		t.Fatalf("worker with its certificate of another cluster: %v", err)
	}
	cfg.Role, cfg.NodeID, cfg.ClusterID = cluster.RoleCoordinator, "w1", "c1"
	if _, err := loadPlaneTLS(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "this process is coordinator/w1") {
		t.Fatalf("coordinator with a worker's certificate: %v", err)
	}
}

func TestRedactionAndBlobDirectory(t *testing.T) {
	// Credentials in URLs never reach output.
	const pw = "s3cr3t-PLANTED"
	code, out, errOut := run(t, nil, "config", "print", "worker", "--node-id", "w1", "--insecure-control-plane",
		"--blob-store", "https://u:"+pw+"@blobs.example/bucket")
	if strings.Contains(out+errOut, pw) {
		t.Fatalf("a URL password reached the output (exit %d):\n%s%s", code, out, errOut)
	}
	if code != ExitUsage || !strings.Contains(errOut, "must not carry credentials") {
		t.Fatalf("blob-store with credentials: exit %d %s", code, errOut)
	}
	code, out, errOut = run(t, nil, "config", "print", "--node-id", "c1", "--insecure-control-plane", "--state-backend", "etcd",
		"--etcd-endpoints", "https://root:"+pw+"@10.0.0.5:2379")
	if strings.Contains(out+errOut, pw) || code != ExitUsage || !strings.Contains(errOut, "credentials in an endpoint URL are not used") {
		t.Fatalf("etcd endpoint with credentials: exit %d\n%s%s", code, out, errOut)
	}
	// A missing blob directory is a configuration error (exit 2) that
	// says so.
	missing := filepath.Join(t.TempDir(), "nope")
	cfg := &config.Config{Role: cluster.RoleWorker, NodeID: "w1", BlobStore: "file://" + missing, InsecureControlPlane: true}
	_, err := NewWorker(cfg, slog.New(slog.DiscardHandler))
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "directory "+missing+" does not exist") {
		t.Fatalf("missing blob directory: %v", err)
	}
}

func TestUsageErrorsExit2WithHint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"get"}, "Run 'talon get --help' for usage."},
		{[]string{"bogus"}, "Run 'talon --help' for usage."},
		{[]string{"pki", "issue", "--nope"}, "Run 'talon pki issue --help' for usage."},
		{[]string{"version", "extra"}, "Run 'talon version --help' for usage."},
	} {
		code, _, errOut := run(t, nil, tc.args...)
		if code != ExitUsage || !strings.Contains(errOut, tc.hint) {
			t.Errorf("talon %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errOut, tc.hint)
		}
	}
}

func TestGetOutputPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such")
	code, _, errOut := run(t, nil, "get", "--insecure-control-plane", "--coordinators", "127.0.0.1:1", "x", "-o", filepath.Join(missing, "x"))
	if code != ExitUsage || !strings.Contains(errOut, "directory "+missing+" does not exist") || strings.Contains(errOut, ".part-") {
		t.Fatalf("get -o into a missing directory: exit %d %q", code, errOut)
	}
	// The temporary file honours the umask like the final file would.
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	f, err := createPart(filepath.Join(t.TempDir(), "obj"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("part file mode %v %v, want 0644 under umask 022", fi.Mode().Perm(), err)
	}
}

// TestValidateMatchesStartUp: what start-up refuses about TLS material,
// validate refuses too, with the same message and exit code: a garbage
// certificate, a key of another certificate, a certificate naming another
// node (validate used to say "valid").
func TestValidateMatchesStartUp(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("t", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	issue := func(node string) pki.Files {
		id := pki.Identity{Role: pki.RoleCoordinator, NodeID: node, Cluster: "default"}
		is, err := ca.Issue(id, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		f := pki.Layout(dir, id)
		if err := is.WriteFiles(f.CertFile, f.KeyFile); err != nil {
			t.Fatal(err)
		}
		return f
	}
	c1, c2 := issue("c1"), issue("c2")
	garbage := filepath.Join(dir, "garbage.crt")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cert, key, want string
	}{
		"garbage certificate":         {garbage, c1.KeyFile, "tls-cert-file"},
		"key of another certificate":  {c1.CertFile, c2.KeyFile, "private key does not match public key"},
		"certificate of another node": {c2.CertFile, c2.KeyFile, "names coordinator/c2 but this process is coordinator/c1"},
	} {
		t.Run(name, func(t *testing.T) {
			flags := []string{"--node-id", "c1", "--tls-ca-file", c1.CAFile, "--tls-cert-file", tc.cert, "--tls-key-file", tc.key}
			vcode, _, verr := run(t, nil, append([]string{"config", "validate", "coordinator"}, flags...)...)
			// Start-up proper (the test's runners stand in for it in run).
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			config.RegisterFlags(fs, cluster.RoleCoordinator)
			if err := fs.Parse(flags); err != nil {
				t.Fatal(err)
			}
			loaded, err := config.Load(cluster.RoleCoordinator, config.Options{Flags: fs})
			if err != nil {
				t.Fatal(err)
			}
			_, serr := NewCoordinator(context.Background(), loaded.Config, nil, nil, slog.New(slog.DiscardHandler))
			var ue *usageError
			if vcode != ExitUsage || !errors.As(serr, &ue) || !strings.Contains(verr, tc.want) || serr == nil || !strings.Contains(verr, serr.Error()) {
				t.Fatalf("validate: %d %q; start-up: %v; want both the usage error %q", vcode, verr, serr, tc.want)
			}
		})
	}
}

// TestConfigPrintInvalid: an invalid configuration is printed whole, each
// problem marked below the settings it names, and the exit code is 2.
func TestConfigPrintInvalid(t *testing.T) {
	code, out, errOut := run(t, nil, "config", "print", "worker", "--node-id", "w1", "--heartbeat-interval", "10s", "--unhealthy-after", "5s")
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, ExitUsage, errOut)
	}
	for _, want := range []string{
		"# INVALID: 2 problem(s), marked below the settings they name\n",
		"heartbeat-interval: 10s  # flag --heartbeat-interval\n# ^ problem 1: heartbeat-interval 10s must be less than unhealthy-after 5s",
		"unhealthy-after: 5s  # flag --unhealthy-after\n# ^ problem 1 (above)\n",
		"tls-ca-file: \"\"  # default\n# ^ problem 2: tls-ca-file, tls-cert-file and tls-key-file are not set",
		"tls-cert-file: \"\"  # default\n# ^ problem 2 (above)\n",
		"cache-dir: ", // the rest is printed too
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "2 problem(s), marked in the output above") {
		t.Errorf("stderr: %s", errOut)
	}
	// A valid one prints no problem and exits 0.
	code, out, _ = run(t, nil, "config", "print", "worker", "--node-id", "w1", "--insecure-control-plane")
	if code != 0 || strings.Contains(out, "problem") {
		t.Fatalf("valid: exit %d\n%s", code, out)
	}
}

// TestDashboardURLSetting: admin-ui-dashboard-url takes an http(s) URL and
// refuses anything else naming the setting, and a password in it is never
// echoed.
func TestDashboardURLSetting(t *testing.T) {
	base := []string{"config", "validate", "--node-id", "c1", "--insecure-control-plane"}
	if code, _, errOut := run(t, nil, append(base, "--admin-ui-dashboard-url", "https://grafana.example/d/talon")...); code != 0 {
		t.Fatalf("https URL refused: %s", errOut)
	}
	for _, tc := range []struct{ value, want string }{
		{"javascript:alert(1)", "must be an absolute http:// or https:// URL"},
		{"grafana.example/d", "must be an absolute http:// or https:// URL"},
		{"https://admin:PLANTED-PW@grafana.example/", "must not carry credentials"},
	} {
		code, out, errOut := run(t, nil, append(base, "--admin-ui-dashboard-url", tc.value)...)
		if code != ExitUsage || !strings.Contains(errOut, "admin-ui-dashboard-url") || !strings.Contains(errOut, tc.want) || strings.Contains(out+errOut, "PLANTED-PW") {
			t.Errorf("%q: exit %d, %s", tc.value, code, errOut)
		}
	}
}

// TestRoleRejectsBadTracingEnv: an OTEL_* value Talon cannot honour stops
// a role before it starts, with a usage error naming the variable and the
// value, rather than running untraced.
func TestRoleRejectsBadTracingEnv(t *testing.T) {
	for env, want := range map[string]string{
		"OTEL_TRACES_EXPORTER=jaeger": `OTEL_TRACES_EXPORTER="jaeger": Talon exports traces only with otlp`,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_EXPORTER_OTLP_PROTOCOL=http/json": `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": must be one of http/protobuf, grpc`,
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=thrift OTEL_TRACES_EXPORTER=otlp":                     `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="thrift"`,
	} {
		code, _, errOut := run(t, strings.Fields(env), "coordinator", "--node-id", "c1", "--cluster-id", "c", "--insecure-control-plane")
		if code != 2 || !strings.Contains(errOut, want) || strings.Contains(errOut, "coordinator would start") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %q before start", env, code, errOut, want)
		}
	}
}
