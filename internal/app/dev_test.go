package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/devcluster"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestDevCluster runs `talon dev` in process and checks it serves a
// coordinator and three ready workers with traffic from --demo-load.
func TestDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	dir := t.TempDir()
	out := startDev(t, devcluster.Options{Workers: 3, BaseDir: dir, DemoLoad: true, ListenHost: "127.0.0.1", AdminAuth: true})
	re := regexp.MustCompile(`web UI and /api/v1\s+(http://\S+)/`)
	var url string
	deadline := time.Now().Add(60 * time.Second) // -race on a busy machine
	for url == "" {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no admin URL printed:\n%s", out.String())
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	testsupport.WaitFor(t, 20*time.Second, "the whole banner", func() bool { return strings.Contains(out.String(), "bin/talon worker --dev-dir") })
	// --admin-auth: the token is in <dir>/admin-token, printed, in the
	// talonctl context the banner names, and required.
	token, err := os.ReadFile(filepath.Join(dir, devcluster.AdminTokenFile))
	ctxFile := filepath.Join(dir, devcluster.ContextFile)
	ctxYAML, cerr := os.ReadFile(ctxFile)
	if err != nil || cerr != nil || !strings.Contains(out.String(), "admin token          "+strings.TrimSpace(string(token))) ||
		!strings.Contains(out.String(), "export TALONCTL_CONFIG="+ctxFile) ||
		!strings.Contains(string(ctxYAML), "token-file: "+filepath.Join(dir, devcluster.AdminTokenFile)) {
		t.Fatalf("admin token file: %v, context file: %v\n%s\nbanner:\n%s", err, cerr, ctxYAML, out.String())
	}
	if _, err := newAPI(t, url, "").Cluster(context.Background()); err == nil {
		t.Fatal("the dev admin API answered without the token")
	}
	api := newAPI(t, url, strings.TrimSpace(string(token)))
	var served uint64
	for served == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("dev cluster never served demo traffic; output:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
		list, err := api.AllNodes(context.Background(), apiv1.NodeFilter{Role: "worker"})
		if err != nil || len(list.Items) != 3 {
			continue
		}
		served = 0
		for _, n := range list.Items {
			if !n.Ready {
				served = 0
				break
			}
			served += n.Counters.BytesServedTotal
		}
	}
}

// TestDevCredentials: `talon get --dir` reads through a dev cluster with
// its client credential (mutual TLS, verified blocks), and a worker started
// with --dev-dir joins it.
func TestDevCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	dir := t.TempDir()
	var out, logs testsupport.SyncBuffer
	go func() {
		done <- runDev(ctx, devcluster.Options{Workers: 2, BaseDir: dir, ListenHost: "127.0.0.1"}, &out, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runDev: %v", err)
		}
		// Ctrl-C is quiet: workers deregister before the coordinator
		// stops, and nothing warns on loopback.
		if l := logs.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("dev cluster logged warnings:\n%s", l)
		}
	}()
	testsupport.WaitFor(t, 60*time.Second, "dev banner", func() bool { return strings.Contains(out.String(), "Try (") })
	control, err := os.ReadFile(filepath.Join(dir, devcluster.CoordinatorsFile))
	if err != nil {
		t.Fatal(err)
	}
	// A third worker joins with --dev-dir.
	cfg, err := devcluster.Config(cluster.RoleWorker, "worker-3", "127.0.0.1", func(c *config.Config) {
		c.InsecureControlPlane = false
		c.DevDir = dir
		c.Coordinators = strings.Fields(string(control))
		c.BlobStore = "file://" + filepath.Join(dir, "blobs")
		c.CacheDir = filepath.Join(dir, "cache-worker-3")
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wcancel(); <-wdone }()
	testsupport.WaitFor(t, 20*time.Second, "worker-3 registered", func() bool { return w.Worker().Serving() })

	// get --dir reads every sample correctly, three times so that blocks
	// come from several owners.
	for _, o := range devcluster.Samples()[:3] {
		want, err := os.ReadFile(filepath.Join(dir, "blobs", filepath.FromSlash(o.Name)))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "out")
		code, _, errOut := run(t, nil, "get", "--dir", dir, o.Name, "-o", dst)
		got, _ := os.ReadFile(dst)
		if code != 0 || !bytes.Equal(got, want) {
			t.Fatalf("get --dir %s: exit %d, %d of %d bytes\n%s", o.Name, code, len(got), len(want), errOut)
		}
	}
	// Without a credential the dev cluster refuses.
	code, _, errOut := run(t, nil, "get", "--coordinators", strings.TrimSpace(string(control)), "--insecure-control-plane", "--timeout", "3s", devcluster.Samples()[0].Name, "-o", filepath.Join(t.TempDir(), "x"))
	if code == 0 {
		t.Fatalf("get without TLS against the dev cluster succeeded: %s", errOut)
	}
}

func newAPI(t *testing.T, url, token string) *apiv1.Client {
	t.Helper()
	c, err := apiv1.NewClient([]string{url}, apiv1.ClientOptions{Timeout: 2 * time.Second, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDevWorkersIsUsageError: --workers out of range exits 2 naming the
// rule, before the dev cluster starts; in range reaches the runner.
func TestDevWorkersIsUsageError(t *testing.T) {
	var got *devcluster.Options
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Runners: Runners{Dev: func(_ context.Context, o devcluster.Options, _ io.Writer, _ *slog.Logger) error {
		got = &o
		return nil
	}}}
	for _, n := range []string{"0", "33"} {
		errb.Reset()
		code := Main(context.Background(), []string{"dev", "--workers", n}, env)
		if code != ExitUsage || got != nil || !strings.Contains(errb.String(), "--workers "+n+": must be from 1 to 32") {
			t.Fatalf("dev --workers %s: exit %d, ran %v, stderr %q", n, code, got != nil, errb.String())
		}
	}
	if code := Main(context.Background(), []string{"dev", "--workers", "2"}, env); code != ExitOK || got == nil || got.Workers != 2 || got.ListenHost != "127.0.0.1" {
		t.Fatalf("dev --workers 2: exit %d, options %+v", code, got)
	}
}

// TestDevHostMustBeLoopback: --host 0.0.0.0 (or any address other hosts
// reach) exits 2 unless --allow-non-loopback; it used to bind every
// interface although the help said loopback.
func TestDevHostMustBeLoopback(t *testing.T) {
	var got *devcluster.Options
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Runners: Runners{Dev: func(_ context.Context, o devcluster.Options, _ io.Writer, _ *slog.Logger) error {
		got = &o
		return nil
	}}}
	for _, host := range []string{"0.0.0.0", "::", "192.0.2.7", "talon.example"} {
		errb.Reset()
		got = nil
		code := Main(context.Background(), []string{"dev", "--host", host}, env)
		if code != ExitUsage || got != nil || !strings.Contains(errb.String(), "--allow-non-loopback") {
			t.Fatalf("dev --host %s: exit %d, ran %v, stderr %q", host, code, got != nil, errb.String())
		}
	}
	for _, args := range [][]string{{"--host", "127.0.0.23"}, {"--host", "::1"}, {"--host", "localhost"}, {"--host", "0.0.0.0", "--allow-non-loopback"}} {
		got = nil
		if code := Main(context.Background(), append([]string{"dev"}, args...), env); code != ExitOK || got == nil {
			t.Fatalf("dev %v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestDevClusterSeveralCoordinators: `talon dev --coordinators 3` serves
// three coordinators over one memory store that agree on the placement;
// SIGUSR1 stops one and the others keep answering with every worker live
// (issue 38: talon dev could not show HA at all); SIGUSR2 starts it again.
func TestDevClusterSeveralCoordinators(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	out := startDev(t, devcluster.Options{Workers: 2, Coordinators: 3, BaseDir: t.TempDir(), ListenHost: "127.0.0.1"})
	testsupport.WaitFor(t, 60*time.Second, "the whole banner", func() bool { return strings.Contains(out.String(), "bin/talon worker --dev-dir") })
	admins := regexp.MustCompile(`coordinator-\d\s+control \S+\s+admin (http://\S+)`).FindAllStringSubmatch(out.String(), -1)
	if len(admins) != 3 || !strings.Contains(out.String(), "kill -USR1 ") {
		t.Fatalf("banner names %d coordinators or no way to stop one:\n%s", len(admins), out.String())
	}
	agree := func(urls []string) (string, bool) {
		pv := ""
		for _, u := range urls {
			cl, err := newAPI(t, u, "").Cluster(context.Background())
			if err != nil || cl.EligibleWorkers != 2 || (pv != "" && cl.PlacementVersion != pv) {
				return "", false
			}
			pv = cl.PlacementVersion
		}
		return pv, true
	}
	all := []string{admins[0][1], admins[1][1], admins[2][1]}
	testsupport.WaitFor(t, 30*time.Second, "three coordinators agreeing on 2 eligible workers", func() bool { _, ok := agree(all); return ok })
	cl, err := newAPI(t, all[0], "").Cluster(context.Background())
	if err != nil || cl.Coordinators.Present != 3 || cl.Coordinators.Expected != 3 {
		t.Fatalf("coordinators %+v, %v: want 3 of 3", cl.Coordinators, err)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// SIGUSR1 stops coordinator-1: the first server of the dev context,
	// the one talonctl and top ask first, so that top shows a failover.
	testsupport.WaitFor(t, 20*time.Second, "a coordinator stopped", func() bool { return strings.Contains(out.String(), "SIGUSR1: stopped coordinator-1") })
	if _, err := newAPI(t, all[0], "").Cluster(context.Background()); err == nil {
		t.Fatal("the stopped coordinator still answers")
	}
	testsupport.WaitFor(t, 30*time.Second, "coordinator-1 missing on the others, workers still eligible", func() bool {
		cl, err := newAPI(t, all[1], "").Cluster(context.Background())
		_, ok := agree(all[1:])
		return err == nil && ok && cl.Coordinators.Present == 2 && len(cl.Coordinators.Missing) == 1 && cl.Coordinators.Missing[0].NodeID == "coordinator-1"
	})
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 30*time.Second, "coordinator-1 back and agreeing", func() bool { _, ok := agree(all); return ok })
}

// startDev runs `talon dev` with opts in process until the test ends and
// returns its output.
func startDev(t *testing.T, opts devcluster.Options) *testsupport.SyncBuffer {
	t.Helper()
	out := &testsupport.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, opts, out, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runDev: %v", err)
		}
	})
	return out
}
