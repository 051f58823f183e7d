package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/cluster"
)

// load runs Load the way the talon command does: flags registered for the
// role and parsed from args.
func load(t *testing.T, role cluster.Role, file string, environ []string, args ...string) (*Loaded, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	RegisterFlags(fs, role)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse flags %v: %v", args, err)
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--tls-") || strings.HasPrefix(a, "--insecure-") }) &&
		!slices.ContainsFunc(environ, func(e string) bool {
			return strings.HasPrefix(e, "TALON_TLS_") || strings.HasPrefix(e, "TALON_INSECURE_")
		}) {
		// Most tests are about other settings: opt out of mutual TLS
		// (TestPlaneTLS covers it).
		environ = append(slices.Clip(environ), "TALON_INSECURE_CONTROL_PLANE=true")
	}
	return Load(role, Options{ConfigFile: file, Environ: environ, Flags: fs})
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	l, err := load(t, cluster.RoleCoordinator, "", nil, "--node-id", "c1")
	if err != nil {
		t.Fatal(err)
	}
	c := l.Config
	if c.HeartbeatInterval != 5*time.Second || c.UnhealthyAfter != 15*time.Second || c.LeaseTTL != 30*time.Second {
		t.Fatalf("timing defaults = %v %v %v", c.HeartbeatInterval, c.UnhealthyAfter, c.LeaseTTL)
	}
	if c.StateBackend != BackendMemory || c.Listen != ":7400" || c.AdminListen != ":7401" {
		t.Fatalf("defaults = %+v", c)
	}
	if c.Kube.MaxInflightWrites != 16 || c.Kube.AdmissionWait != 50*time.Millisecond {
		t.Fatalf("kube admission defaults = %d %v", c.Kube.MaxInflightWrites, c.Kube.AdmissionWait)
	}
	w, err := load(t, cluster.RoleWorker, "", nil, "--node-id", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Config.Listen != ":7500" || w.Config.BlockSize != 4<<20 || w.Config.CacheCapacity != 10<<30 {
		t.Fatalf("worker defaults = %+v", w.Config)
	}
}

// TestPrecedence sets the same key in every layer and removes the layers
// from the top, checking that each time the highest remaining one wins.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, "talon.yaml", "heartbeat-interval: 2s\nnode-id: from-file\n")
	env := []string{"TALON_HEARTBEAT_INTERVAL=3s"}
	flag := []string{"--heartbeat-interval", "4s"}
	tests := []struct {
		name   string
		file   string
		env    []string
		args   []string
		want   time.Duration
		source string
	}{
		{"default", "", nil, nil, 5 * time.Second, "default"},
		{"file over default", file, nil, nil, 2 * time.Second, "file " + file},
		{"env over file", file, env, nil, 3 * time.Second, "env TALON_HEARTBEAT_INTERVAL"},
		{"flag over env", file, env, flag, 4 * time.Second, "flag --heartbeat-interval"},
		{"flag over default", "", nil, flag, 4 * time.Second, "flag --heartbeat-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := load(t, cluster.RoleCoordinator, tt.file, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if l.Config.HeartbeatInterval != tt.want {
				t.Fatalf("heartbeat-interval = %v, want %v", l.Config.HeartbeatInterval, tt.want)
			}
			if got := l.Sources["heartbeat-interval"].String(); got != tt.source {
				t.Fatalf("source = %q, want %q", got, tt.source)
			}
		})
	}
}

func TestFileShapes(t *testing.T) {
	file := writeFile(t, "talon.yaml", `
cluster-id: prod
node-id: w-7
labels:
  topology.kubernetes.io/zone: eu-1a
  rack: "12"
coordinators: [c1:7400, "c2:7400"]
cache-capacity: 2GiB
block-size: 1048576
admin-expose-metrics: false
state-backend: etcd   # a coordinator setting in a shared file is ignored by workers
`)
	l, err := load(t, cluster.RoleWorker, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := l.Config
	if c.Labels["topology.kubernetes.io/zone"] != "eu-1a" || c.Labels["rack"] != "12" {
		t.Fatalf("labels = %v", c.Labels)
	}
	if strings.Join(c.Coordinators, ",") != "c1:7400,c2:7400" || c.CacheCapacity != 2<<30 || c.BlockSize != 1<<20 || c.Admin.ExposeMetrics {
		t.Fatalf("config = %+v", c)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		role    cluster.Role
		file    string // file content; empty for none
		env     []string
		args    []string
		wantErr []string
	}{
		{"unknown file key", cluster.RoleCoordinator, "heartbeat: 5s\n", nil, nil, []string{`unknown key "heartbeat"`, "talon.yaml"}},
		{"secret in file", cluster.RoleCoordinator, "etcd-password: x\n", nil, nil, []string{"etcd-password is a secret", "TALON_ETCD_PASSWORD"}},
		{"bad duration flag", cluster.RoleCoordinator, "", nil, []string{"--lease-ttl", "30"}, []string{`lease-ttl "30" (from flag --lease-ttl)`, "duration"}},
		{"bad duration env", cluster.RoleCoordinator, "", []string{"TALON_REQUEST_TIMEOUT=soon"}, nil, []string{`request-timeout "soon" (from env TALON_REQUEST_TIMEOUT)`}},
		{"bad bool file", cluster.RoleCoordinator, "ha: maybe\n", nil, nil, []string{"ha", "true or false"}},
		{"bad int", cluster.RoleCoordinator, "", nil, []string{"--coordinator-replicas", "three"}, []string{"coordinator-replicas", "whole number"}},
		{"heartbeat over unhealthy", cluster.RoleCoordinator, "", nil, []string{"--heartbeat-interval", "20s"}, []string{"heartbeat-interval 20s", "unhealthy-after 15s"}},
		{"unhealthy over ttl", cluster.RoleCoordinator, "", nil, []string{"--unhealthy-after", "40s"}, []string{"unhealthy-after 40s", "lease-ttl 30s"}},
		{"label value a list", cluster.RoleCoordinator, "labels:\n  rack: [1, 2]\n", nil, nil, []string{"labels", `value of "rack" must be a string, not a list`}},
		{"listen host markup", cluster.RoleWorker, "", nil, []string{"--listen", "<script>:80"}, []string{`listen "<script>:80": host must be empty (every interface), an IP address or a DNS name`}},
		{"advertise host markup", cluster.RoleWorker, "", nil, []string{"--advertise", "<script>alert(1)</script>:80"}, []string{"advertise", "host must be an IP address or a DNS name"}},
		{"heartbeat flood", cluster.RoleWorker, "", nil, []string{"--heartbeat-interval", "1ns"}, []string{"heartbeat-interval 1ns: must be from 100ms to 10m0s", "from flag --heartbeat-interval"}},
		{"lease ttl typo", cluster.RoleCoordinator, "", nil, []string{"--lease-ttl", "9999999h"}, []string{`lease-ttl "9999999h" (from flag --lease-ttl): too large: a duration is at most 2562047h47m16.854775807s`}},
		{"lease ttl too long", cluster.RoleCoordinator, "", nil, []string{"--lease-ttl", "48h"}, []string{"lease-ttl 48h0m0s: must be from 1s to 24h0m0s"}},
		{"negative drain delay", cluster.RoleCoordinator, "", nil, []string{"--drain-delay", "-1s"}, []string{`drain-delay "-1s" (from flag --drain-delay): must not be negative`}},
		{"one lost heartbeat must not make a record late", cluster.RoleCoordinator, "", nil, []string{"--heartbeat-interval", "7s"}, []string{"unhealthy-after 15s must be at least 16s", "heartbeat-interval 7s", "request-timeout 2s", "heartbeat-interval from flag --heartbeat-interval", "unhealthy-after from default", "request-timeout from default"}},
		{"memory with ha", cluster.RoleCoordinator, "", nil, []string{"--ha"}, []string{"state-backend memory", "ha"}},
		{"memory with replicas", cluster.RoleCoordinator, "", nil, []string{"--coordinator-replicas", "3"}, []string{"state-backend memory", "coordinator-replicas 3"}},
		{"bad backend", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "consul"}, []string{`state-backend "consul"`, "memory, etcd or kubernetes"}},
		{"kube inflight writes zero", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "kubernetes", "--kube-max-inflight-writes", "0"}, []string{"kube-max-inflight-writes 0", "from 1 to 100000"}},
		{"max events past the shared log", cluster.RoleCoordinator, "", nil, []string{"--max-events", "1001"}, []string{"max-events 1001", "from 1 to 1000"}},
		{"max event age past the shared log", cluster.RoleCoordinator, "", nil, []string{"--max-event-age", "2h"}, []string{"max-event-age 2h0m0s", "from 1m0s to 1h0m0s"}},
		{"kube admission wait zero", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "kubernetes", "--kube-admission-wait", "0s"}, []string{"kube-admission-wait 0s", "from 1ms to request-timeout 2s"}},
		{"kube admission wait over request timeout", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "kubernetes", "--kube-admission-wait", "3s"}, []string{"kube-admission-wait 3s", "request-timeout 2s"}},
		{"etcd fractional ttl", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "etcd", "--lease-ttl", "30500ms"}, []string{"lease-ttl 30.5s", "whole number of seconds"}},
		{"etcd compaction interval too short", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "etcd", "--etcd-compaction-interval", "500ms"}, []string{"etcd-compaction-interval 500ms: must be 0 (off) or from 1s to 24h0m0s"}},
		{"etcd compaction interval too long", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "etcd", "--etcd-compaction-interval", "48h"}, []string{"etcd-compaction-interval 48h0m0s", "from 1s to 24h0m0s"}},
		{"bad node id", cluster.RoleCoordinator, "", nil, []string{"--node-id", "a b"}, []string{"node-id", "only letters"}},
		{"too many labels", cluster.RoleCoordinator, "", nil, manyLabels(17), []string{"17 entries", "at most 16"}},
		{"label without =", cluster.RoleCoordinator, "", nil, []string{"--label", "zone"}, []string{`entry "zone" must be key=value`}},
		{"bad listen", cluster.RoleCoordinator, "", nil, []string{"--listen", "7400"}, []string{`listen "7400"`, "host:port"}},
		{"worker no coordinators", cluster.RoleWorker, "coordinators: []\n", nil, nil, []string{"coordinators is empty"}},
		{"worker bad blob store", cluster.RoleWorker, "", nil, []string{"--blob-store", "ftp://bucket"}, []string{`blob-store "ftp://bucket": must be a file://, http://, https://, s3://, gs:// or az:// URL`}},
		{"worker store reads per client", cluster.RoleWorker, "", nil, []string{"--store-reads-per-client", "0"}, []string{"store-reads-per-client 0: must be from 1 to 1000000 a second"}},
		{"worker read-ahead negative", cluster.RoleWorker, "", nil, []string{"--read-ahead", "-1"}, []string{"read-ahead -1: must be from 0 (off) to 64 blocks"}},
		{"worker read-ahead too far", cluster.RoleWorker, "", nil, []string{"--read-ahead", "65"}, []string{"read-ahead 65: must be from 0 (off) to 64 blocks"}},
		{"worker read-ahead loads", cluster.RoleWorker, "", nil, []string{"--read-ahead-loads", "0"}, []string{"read-ahead-loads 0: must be from 1 to 1024"}},
		{"worker warmup rate", cluster.RoleWorker, "", nil, []string{"--warmup-rate", "-1"}, []string{"warmup-rate -1: must be from 0 (no bound) to 100000 loads a second"}},
		{"worker warmup period", cluster.RoleWorker, "", nil, []string{"--warmup-period", "25h"}, []string{"warmup-period 25h0m0s: must be from 0s to 24h0m0s"}},
		{"attestation mode", cluster.RoleCoordinator, "", nil, []string{"--worker-attestation", "spiffe"}, []string{`worker-attestation "spiffe": must be off or kubernetes`}},
		{"attestation service account", cluster.RoleCoordinator, "", nil, []string{"--worker-attestation", "kubernetes", "--worker-attestation-service-accounts", "talon-worker"}, []string{`worker-attestation-service-accounts "talon-worker": want namespace/name`}},
		{"attestation audience", cluster.RoleCoordinator, "", nil, []string{"--worker-attestation", "kubernetes", "--worker-attestation-audience", ""}, []string{`worker-attestation-audience "": must be 1 to 253 bytes`}},
		{"worker bad placement-replicas", cluster.RoleWorker, "", nil, []string{"--placement-replicas", "17"}, []string{"placement-replicas 17: must be from 1 to 16"}},
		{"worker block size", cluster.RoleWorker, "", nil, []string{"--block-size", "1KiB"}, []string{"block-size 1024", "64KiB"}},
		{"worker bad bytes", cluster.RoleWorker, "", nil, []string{"--cache-capacity", "lots"}, []string{"cache-capacity", "size"}},
		{"password file missing", cluster.RoleCoordinator, "", nil, []string{"--state-backend", "etcd", "--etcd-username", "u", "--etcd-password-file", "/nonexistent/pw"}, []string{"etcd-password-file", "/nonexistent/pw"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := ""
			if tt.file != "" {
				file = writeFile(t, "talon.yaml", tt.file)
			}
			args := append([]string{"--node-id", "n1"}, tt.args...)
			if tt.name == "bad node id" {
				args = tt.args
			}
			_, err := load(t, tt.role, file, tt.env, args...)
			if err == nil {
				t.Fatal("Load succeeded, want error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func manyLabels(n int) []string {
	var args []string
	for i := range n {
		args = append(args, "--label", "k"+string(rune('a'+i))+"=v")
	}
	return args
}

// TestRedaction plants secrets through every channel they may take and
// checks they never reach printed configuration, logs or errors.
func TestRedaction(t *testing.T) {
	const planted = "s3cr3t-PLANTED-value"
	pw := writeFile(t, "pw", planted+"\n")
	tokens := writeFile(t, "tokens", "# admin tokens\n"+planted+"-token\n")
	env := []string{"TALON_ADMIN_TOKEN=" + planted + "-env"}
	l, err := load(t, cluster.RoleCoordinator, "", env,
		"--state-backend", "etcd", "--etcd-username", "talon", "--etcd-password-file", pw, "--admin-token-file", tokens)
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Etcd.Password.Reveal() != planted {
		t.Fatalf("password not read from file")
	}
	if len(l.Config.Admin.Tokens) != 1 || len(l.Config.Admin.FileTokens) != 1 {
		t.Fatalf("tokens = %d and %d from the file, want 1 and 1", len(l.Config.Admin.Tokens), len(l.Config.Admin.FileTokens))
	}
	var out bytes.Buffer
	if err := l.Print(&out); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", l.Config, "password", l.Config.Etcd.Password)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", l.Config)
	for name, text := range map[string]string{"print": out.String(), "logs": logs.String()} {
		if strings.Contains(text, planted) {
			t.Fatalf("%s leaks the secret:\n%s", name, text)
		}
	}
	if !strings.Contains(out.String(), `etcd-password: "[REDACTED]"`) || !strings.Contains(out.String(), `admin-token: "[REDACTED]"`) {
		t.Fatalf("print does not show redacted secrets:\n%s", out.String())
	}
	// A bad value of a secret setting must not echo it either.
	_, err = load(t, cluster.RoleCoordinator, "", []string{"TALON_ETCD_PASSWORD=" + planted}, "--state-backend", "etcd")
	if err == nil || strings.Contains(err.Error(), planted) {
		t.Fatalf("error for password without user = %v", err)
	}
}

// FuzzLoadFile feeds arbitrary bytes as a config file: Load must never
// panic, and whatever it accepts must be a valid configuration.
func FuzzLoadFile(f *testing.F) {
	f.Add([]byte("cluster-id: prod\nnode-id: n1\nheartbeat-interval: 2s\n"))
	f.Add([]byte("labels:\n  zone: a\ncoordinators: [a:1, b:2]\n"))
	f.Add([]byte("etcd-password: x\n"))
	f.Add([]byte("ha: maybe\nlease-ttl: [1]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "talon.yaml")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, role := range cluster.Roles() {
			l, err := Load(role, Options{ConfigFile: p, Environ: []string{"TALON_NODE_ID=n1"}})
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v does not wrap ErrInvalid", err)
				}
				continue
			}
			if err := l.Config.Validate(); err != nil {
				t.Fatalf("accepted an invalid configuration: %v", err)
			}
		}
	})
}

func TestPlaneTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "w.crt"), filepath.Join(dir, "w.key")
	tests := []struct {
		name string
		args []string
		want string // substring of the error; "" means valid
	}{
		{"nothing set", []string{"--tls-ca-file="}, "tls-ca-file, tls-cert-file and tls-key-file are not set"},
		{"insecure chosen", []string{"--insecure-control-plane"}, ""},
		{"all three", []string{"--tls-ca-file", ca, "--tls-cert-file", cert, "--tls-key-file", key}, ""},
		{"missing key", []string{"--tls-ca-file", ca, "--tls-cert-file", cert}, `tls-key-file "": set all three`},
		{"both", []string{"--tls-ca-file", ca, "--tls-cert-file", cert, "--tls-key-file", key, "--insecure-control-plane"}, "choose one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := load(t, cluster.RoleWorker, "", nil, append([]string{"--node-id", "w1"}, tt.args...)...)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			case tt.want == "" && len(tt.args) > 1 && l.Config.TLS != (TLSConfig{CAFile: ca, CertFile: cert, KeyFile: key}):
				t.Fatalf("TLS config %+v", l.Config.TLS)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:pw@host:2379/x": "https://u:xxxxx@host:2379/x",
		"https://host:2379":        "https://host:2379",
		"10.0.0.5:2379":            "10.0.0.5:2379",
		"http://u:p%zz@host":       "http://xxxxx@host",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorsNameSourcesAndSuggest(t *testing.T) {
	_, err := load(t, cluster.RoleCoordinator, "", []string{"TALON_LEASE_TTL=10s"}, "--node-id", "c1")
	if err == nil || !strings.Contains(err.Error(), "lease-ttl from env TALON_LEASE_TTL") || !strings.Contains(err.Error(), "unhealthy-after from default") {
		t.Fatalf("timing error without sources: %v", err)
	}
	_, err = load(t, cluster.RoleCoordinator, "", nil, "--node-id", "c1", "--state-backend", "etcdd")
	if err == nil || !strings.Contains(err.Error(), "state-backend from flag --state-backend") {
		t.Fatalf("state-backend error without source: %v", err)
	}
	f := writeFile(t, "talon.yaml", "etcd-endpoint: [x]\n")
	_, err = load(t, cluster.RoleCoordinator, f, nil, "--node-id", "c1")
	if err == nil || !strings.Contains(err.Error(), `unknown key "etcd-endpoint" (did you mean "etcd-endpoints"?)`) {
		t.Fatalf("unknown key without a suggestion: %v", err)
	}
}

func TestLabelsFlagAndDeprecatedAlias(t *testing.T) {
	for _, flag := range []string{"--labels", "--label"} {
		l, err := load(t, cluster.RoleWorker, "", nil, "--node-id", "w1", flag, "zone=a", flag, "rack=r1")
		if err != nil {
			t.Fatalf("%s: %v", flag, err)
		}
		if l.Config.Labels["zone"] != "a" || l.Config.Labels["rack"] != "r1" || l.Sources["labels"].Detail != flag {
			t.Fatalf("%s: labels %v from %v", flag, l.Config.Labels, l.Sources["labels"])
		}
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	RegisterFlags(fs, cluster.RoleWorker)
	if f := fs.Lookup("label"); f == nil || f.Deprecated == "" {
		t.Fatal("--label is not a deprecated alias")
	}
}

// TestConfigFileMustBeRegular: a config file that is not a regular file
// (a FIFO would block, /dev/zero never end) or is over the size limit is
// refused before it is read, naming the file and the rule.
func TestConfigFileMustBeRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := writeFile(t, "big.yaml", "# "+strings.Repeat("x", MaxConfigFileBytes)+"\n")
	for path, want := range map[string]string{
		fifo:        "must be a regular file, not a named pipe",
		"/dev/zero": "must be a regular file, not a character device",
		t.TempDir(): "must be a regular file, not a directory",
		big:         fmt.Sprintf("must be at most %d", MaxConfigFileBytes),
	} {
		done := make(chan error, 1)
		go func() { _, err := load(t, cluster.RoleWorker, path, nil); done <- err }()
		select {
		case err := <-done:
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
				t.Errorf("config file %s: %v, want an error naming it and %q", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("config file %s: Load still reading after 10s", path)
		}
	}
}

// TestPrintRedactsNestedEndpointCredentials: a password or a session token
// in the URL of an s3:// endpoint= value is redacted by config print (it
// was shown: endpoint= was a harmless parameter, whatever its value held).
func TestPrintRedactsNestedEndpointCredentials(t *testing.T) {
	store := "s3://bucket/p?region=eu-west-1&endpoint=" + url.QueryEscape("https://minio:PLANTED-pw@h:9000/?X-Amz-Security-Token=PLANTED-tok")
	l, err := load(t, cluster.RoleWorker, "", nil, "--node-id", "w1", "--coordinators", "127.0.0.1:7000", "--blob-store", store)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := l.Print(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "PLANTED") {
		t.Fatalf("config print shows a credential nested in endpoint=:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "blob-store: ") || !strings.Contains(out.String(), "minio") {
		t.Fatalf("config print hides the endpoint itself:\n%s", out.String())
	}
}
