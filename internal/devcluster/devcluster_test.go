package devcluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		workers int
		want    string
	}{{0, "--workers 0: must be from 1 to 32"}, {33, "--workers 33: must be from 1 to 32"}, {1, ""}, {32, ""}} {
		err := Options{Workers: tt.workers, ListenHost: "127.0.0.1"}.Validate()
		if (tt.want == "") != (err == nil) || (err != nil && err.Error() != tt.want) {
			t.Errorf("Validate with %d workers: %v, want %q", tt.workers, err, tt.want)
		}
	}
	// An empty host binds every interface, as 0.0.0.0 does.
	for host, ok := range map[string]bool{"": false, "0.0.0.0": false, "::": false, "10.1.2.3": false, "dev.example": false,
		"127.0.0.1": true, "127.9.8.7": true, "::1": true, "[::1]": true, "localhost": true, "LOCALHOST": true, "::ffff:127.0.0.1": true} {
		err := Options{Workers: 1, ListenHost: host}.Validate()
		if (err == nil) != ok {
			t.Errorf("Validate with host %q: %v, want ok %v", host, err, ok)
		}
		if err := (Options{Workers: 1, ListenHost: host, AllowNonLoopback: true}).Validate(); err != nil {
			t.Errorf("Validate with host %q and AllowNonLoopback: %v", host, err)
		}
	}
}

func TestConfig(t *testing.T) {
	cfg, err := Config(cluster.RoleWorker, "worker-9", "127.0.0.2", func(c *config.Config) { c.CacheCapacity = 64 << 20 })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClusterID != "dev" || cfg.NodeID != "worker-9" || cfg.Listen != "127.0.0.2:0" || cfg.AdminListen != "127.0.0.2:0" ||
		cfg.HeartbeatInterval != time.Second || cfg.DrainDelay != 0 || cfg.CacheCapacity != 64<<20 || !cfg.InsecureControlPlane {
		t.Fatalf("config %+v", cfg)
	}
	// mutate runs before validation.
	if _, err := Config(cluster.RoleCoordinator, "c1", "127.0.0.1", func(c *config.Config) { c.LeaseTTL = time.Millisecond }); err == nil {
		t.Fatal("an invalid mutation passed validation")
	}
}

// TestDirLayout: prepare writes the samples, a CA that a second run keeps,
// the client credential (ClientFiles) and the admin token; Join issues a
// joining worker its credential from that CA; Coordinators reads the
// control addresses.
func TestDirLayout(t *testing.T) {
	dir := t.TempDir()
	d, err := prepare(dir, Options{Workers: 1, ListenHost: "127.0.0.1", AdminAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Samples() {
		fi, err := os.Stat(filepath.Join(dir, "blobs", filepath.FromSlash(s.Name)))
		if err != nil || fi.Size() != s.Size {
			t.Fatalf("sample %s: %v, size %v want %d", s.Name, err, fi, s.Size)
		}
	}
	first, err := os.ReadFile(filepath.Join(dir, "blobs", "samples", "small.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if d.clientFiles != ClientFiles(dir) {
		t.Fatalf("client files %+v, ClientFiles %+v", d.clientFiles, ClientFiles(dir))
	}
	src, err := pki.Load(ClientFiles(dir), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := src.Identity(); err != nil || id != (pki.Identity{Role: pki.RoleClient, NodeID: ClientID, Cluster: ClusterID}) {
		t.Fatalf("client identity %v %v", id, err)
	}
	token, err := os.ReadFile(filepath.Join(dir, AdminTokenFile))
	if err != nil || strings.TrimSpace(string(token)) != d.adminToken || len(d.adminToken) != 48 {
		t.Fatalf("admin token %q (%v), want %q", token, err, d.adminToken)
	}
	caBefore, err := os.ReadFile(filepath.Join(dir, TLSDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepare(dir, Options{Workers: 1, ListenHost: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(filepath.Join(dir, TLSDir, "ca.crt"))
	again, _ := os.ReadFile(filepath.Join(dir, "blobs", "samples", "small.bin"))
	if !bytes.Equal(caBefore, caAfter) || !bytes.Equal(first, again) {
		t.Fatal("a second run replaced the CA or changed a sample")
	}

	cfg := &config.Config{Role: cluster.RoleWorker, NodeID: "worker-7", DevDir: dir}
	if err := Join(cfg); err != nil {
		t.Fatal(err)
	}
	src, err = pki.Load(pki.Files{CAFile: cfg.TLS.CAFile, CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile}, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := src.Identity(); err != nil || id != (pki.Identity{Role: pki.RoleWorker, NodeID: "worker-7"}) {
		t.Fatalf("joined identity %v %v", id, err)
	}
	if err := Join(&config.Config{Role: cluster.RoleWorker, NodeID: "w", DevDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not a `talon dev` directory") {
		t.Fatalf("Join outside a dev directory: %v", err)
	}

	if _, err := Coordinators(dir); err == nil {
		t.Fatal("Coordinators before a cluster wrote them")
	}
	if err := os.WriteFile(filepath.Join(dir, CoordinatorsFile), []byte("127.0.0.1:7400\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Coordinators(dir); err != nil || len(got) != 1 || got[0] != "127.0.0.1:7400" {
		t.Fatalf("Coordinators = %v, %v", got, err)
	}
}
