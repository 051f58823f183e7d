package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
)

// TestWorkerAdminBeforeCacheScan: RunWorker's first half (bindWorker)
// binds the admin listener and serves it before the cache is opened: in
// between, /healthz answers 200 and /readyz 503 saying the cache is being
// opened, and no incarnation exists; once open has built the runtime,
// /readyz reports the runtime's own reasons (here: no coordinator).
func TestWorkerAdminBeforeCacheScan(t *testing.T) {
	l, err := config.Load(cluster.RoleWorker, config.Options{Environ: []string{"TALON_INSECURE_CONTROL_PLANE=true"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.Config
	cfg.ClusterID, cfg.NodeID = "scan", "w1"
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Coordinators = []string{"127.0.0.1:1"} // nothing answers
	cfg.BlobStore, cfg.CacheDir, cfg.CacheCapacity, cfg.BlockSize = "file://"+t.TempDir(), t.TempDir(), 64<<20, 1<<20
	cfg.DrainDelay, cfg.ShutdownTimeout = 0, 2*time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := bindWorker(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	p.early = startAdmin(context.Background(), p.Admin, p.adminLn)
	base := "http://" + p.AdminAddr().String()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	get := func(path string) (int, string) {
		t.Helper()
		res, err := hc.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz before the cache is open: %d, want 200", code)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "opening the cache directory") {
		t.Errorf("/readyz before the cache is open: %d %s, want 503 naming the cache scan", code, body)
	}
	var st map[string]any
	if code, body := get("/api/v1/status"); code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st["nodeId"] != "w1" || (st["incarnationId"] != nil && st["incarnationId"] != "") {
		t.Errorf("/api/v1/status before the runtime exists: %d %s, want node w1 and no incarnation", code, body)
	}

	if err := p.open(cfg, log); err != nil {
		t.Fatal(err)
	}
	code, body = get("/readyz")
	var h struct{ Reasons []string }
	_ = json.Unmarshal([]byte(body), &h)
	if code != http.StatusServiceUnavailable || strings.Contains(body, "opening the cache directory") || len(h.Reasons) == 0 {
		t.Errorf("/readyz after open, no coordinator: %d %s, want 503 with the runtime's reasons", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // drain at once: Run returns, and stops the early admin listener
	if err := p.Run(ctx); err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := hc.Get(base + "/healthz"); err == nil {
		t.Error("the admin listener still answers after Run returned")
	}
}
