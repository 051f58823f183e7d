package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustPutGet(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
		t.Fatalf("get %q = %v, want one key with value %q", key, resp.Kvs, value)
	}
}

func TestEtcdStartPutGet(t *testing.T) {
	SkipIfShort(t)
	tests := []struct {
		name    string
		opts    EtcdOptions
		wantTLS bool
	}{
		{name: "plain", opts: EtcdOptions{}},
		{name: "tls", opts: EtcdOptions{TLS: true}, wantTLS: true},
		{name: "client cert auth", opts: EtcdOptions{ClientCertAuth: true}, wantTLS: true},
		{name: "auth", opts: EtcdOptions{Auth: true, RootPassword: "s3cret"}},
		{name: "auth over tls", opts: EtcdOptions{Auth: true, TLS: true}, wantTLS: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := StartEtcd(t, tt.opts)
			eps := e.Endpoints()
			if len(eps) != 1 {
				t.Fatalf("Endpoints() = %v, want one", eps)
			}
			wantScheme := "http://127.0.0.1:"
			if tt.wantTLS {
				wantScheme = "https://127.0.0.1:"
			}
			if !strings.HasPrefix(eps[0], wantScheme) {
				t.Errorf("endpoint %q, want prefix %q", eps[0], wantScheme)
			}
			files := e.TLSFiles()
			if tt.wantTLS {
				for _, f := range []string{files.CAFile, files.CertFile, files.KeyFile} {
					if _, err := os.Stat(f); err != nil {
						t.Errorf("TLS file: %v", err)
					}
				}
				if e.TLSConfig() == nil {
					t.Error("TLSConfig() = nil with TLS")
				}
			} else if files != (TLSFiles{}) || e.TLSConfig() != nil {
				t.Errorf("TLSFiles() = %+v, TLSConfig() = %v without TLS, want zero and nil", files, e.TLSConfig())
			}
			if tt.opts.Auth {
				if e.RootPassword() == "" {
					t.Error("RootPassword() is empty with Auth")
				}
				if tt.opts.RootPassword != "" && e.RootPassword() != tt.opts.RootPassword {
					t.Errorf("RootPassword() = %q, want %q", e.RootPassword(), tt.opts.RootPassword)
				}
			}
			mustPutGet(t, e.Client(t), "/talon/"+tt.name, "v-"+tt.name)

			if tt.opts.Auth {
				// Without credentials every key operation is refused.
				anon := e.NewClient(t, "", "")
				if _, err := anon.Put(ctxTimeout(t, 5*time.Second), "/talon/anon", "x"); !errors.Is(err, rpctypes.ErrUserEmpty) && !errors.Is(err, rpctypes.ErrPermissionDenied) {
					t.Errorf("unauthenticated put: err = %v, want user empty or permission denied", err)
				}
			}
		})
	}
}

func TestEtcdTLSRejectsClients(t *testing.T) {
	SkipIfShort(t)
	e := StartEtcd(t, EtcdOptions{ClientCertAuth: true})

	// A client that trusts the CA but presents no certificate is refused.
	cfg := e.ClientConfig("", "")
	cfg.TLS.Certificates = nil
	cfg.DialTimeout = 2 * time.Second
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctxTimeout(t, 1500*time.Millisecond), "k"); err == nil {
		t.Fatal("get without a client certificate succeeded, want an error")
	}

	// A plain-HTTP client cannot talk to the TLS port.
	plain := e.ClientConfig("", "")
	plain.TLS = nil
	plain.Endpoints = []string{strings.Replace(e.Endpoints()[0], "https://", "http://", 1)}
	plain.DialTimeout = 2 * time.Second
	pcli, err := clientv3.New(plain)
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	defer pcli.Close()
	if _, err := pcli.Get(ctxTimeout(t, 1500*time.Millisecond), "k"); err == nil {
		t.Fatal("plain-HTTP get against a TLS server succeeded, want an error")
	}
}

func TestEtcdAuthUsers(t *testing.T) {
	SkipIfShort(t)
	e := StartEtcd(t, EtcdOptions{Auth: true})
	e.AddPrefixUser(t, "talon", "pw-talon", "/talon/")
	e.AddNoAccessUser(t, "nobody", "pw-nobody")

	talon := e.NewClient(t, "talon", "pw-talon")
	mustPutGet(t, talon, "/talon/nodes/a", "1")
	if _, err := talon.Put(ctxTimeout(t, 5*time.Second), "/other/x", "1"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("prefix user put outside its prefix: err = %v, want %v", err, rpctypes.ErrPermissionDenied)
	}

	nobody := e.NewClient(t, "nobody", "pw-nobody")
	if _, err := nobody.Get(ctxTimeout(t, 5*time.Second), "/talon/nodes/a"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("no-access user get: err = %v, want %v", err, rpctypes.ErrPermissionDenied)
	}

	cfg := e.ClientConfig("talon", "wrong")
	cfg.DialTimeout = 3 * time.Second
	bad, err := clientv3.New(cfg)
	if err == nil {
		_, err = bad.Get(ctxTimeout(t, 3*time.Second), "/talon/nodes/a")
		bad.Close()
	}
	if !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Errorf("wrong password: err = %v, want %v", err, rpctypes.ErrAuthFailed)
	}
}

func TestEtcdRestartKeepsData(t *testing.T) {
	SkipIfShort(t)
	tests := []struct {
		name string
		down func(*Etcd)
	}{
		{name: "stop", down: (*Etcd).Stop},
		{name: "kill", down: (*Etcd).Kill},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := StartEtcd(t, EtcdOptions{Auth: true, TLS: true})
			before := e.Endpoints()[0]
			cli := e.Client(t)
			mustPutGet(t, cli, "/talon/k", "v1")
			pid := e.p.pid()

			tt.down(e)
			if e.p.pid() != 0 {
				t.Fatal("etcd still running after down")
			}
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("kill(%d, 0) after down: err = %v, want ESRCH", pid, err)
			}
			if _, err := cli.Get(ctxTimeout(t, time.Second), "/talon/k"); err == nil {
				t.Fatal("get while etcd is down succeeded")
			}

			e.Start()
			if got := e.Endpoints()[0]; got != before {
				t.Errorf("endpoint after restart = %q, want %q", got, before)
			}
			// The client made before the restart reconnects on its own.
			resp, err := cli.Get(ctxTimeout(t, 10*time.Second), "/talon/k")
			if err != nil {
				t.Fatalf("get after restart: %v", err)
			}
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
				t.Fatalf("after restart /talon/k = %v, want v1", resp.Kvs)
			}
			mustPutGet(t, cli, "/talon/k", "v2")
		})
	}
}

func TestEtcdPauseResume(t *testing.T) {
	SkipIfShort(t)
	e := StartEtcd(t, EtcdOptions{})
	cli := e.Client(t)
	mustPutGet(t, cli, "k", "before")

	e.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := cli.Put(ctx, "k", "paused")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put while paused: err = %v, want %v", err, context.DeadlineExceeded)
	}

	e.Resume()
	// The put that timed out may still be applied after the resume (its
	// request had reached etcd; the client only gave up waiting), possibly
	// after a later put: a fresh key shows etcd serves again.
	mustPutGet(t, cli, "k2", "after")
}

func TestEtcdPausedIsKilledByCleanup(t *testing.T) {
	SkipIfShort(t)
	var pid int
	var dataDir string
	t.Run("inner", func(t *testing.T) {
		e := StartEtcd(t, EtcdOptions{})
		pid, dataDir = e.p.pid(), e.DataDir()
		if pid == 0 {
			t.Fatal("no pid")
		}
		e.Pause() // cleanup must kill a stopped process too
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("etcd pid %d after cleanup: kill(pid, 0) err = %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s after cleanup: stat err = %v, want not exist", dataDir, err)
	}
}

func TestEtcdCompact(t *testing.T) {
	SkipIfShort(t)
	e := StartEtcd(t, EtcdOptions{})
	cli := e.Client(t)
	ctx := ctxTimeout(t, 10*time.Second)
	first, err := cli.Put(ctx, "k", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "2"); err != nil {
		t.Fatal(err)
	}
	rev := e.Compact(t, 0)
	if rev <= first.Header.Revision {
		t.Fatalf("Compact(0) = %d, want > %d", rev, first.Header.Revision)
	}
	if _, err := cli.Get(ctx, "k", clientv3.WithRev(first.Header.Revision)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("get at compacted revision: err = %v, want %v", err, rpctypes.ErrCompacted)
	}
}

func TestEtcdLogsGoToFile(t *testing.T) {
	SkipIfShort(t)
	e := StartEtcd(t, EtcdOptions{})
	b, err := os.ReadFile(e.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	// etcd logs its start-up at info level; finding it proves output is
	// redirected to the file rather than the test's stdout.
	if !strings.Contains(string(b), "ready to serve client requests") {
		t.Fatalf("log %s lacks etcd's start-up message; got:\n%s", e.LogFile(), tail(string(b), 20))
	}
}

// fatalRecorder is a testing.TB whose Fatal methods record the message and
// end the calling goroutine, so tests can check what a helper reports.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runRecorded(f func(testing.TB)) string {
	r := &fatalRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

func TestBinaryEnvOverride(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "exe")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExe := filepath.Join(dir, "notexe")
	if err := os.WriteFile(notExe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		value   string
		lookup  func(testing.TB) string
		want    string // returned path; empty when the lookup must fail
		wantMsg string
	}{
		{name: "etcd executable", value: exe, lookup: EtcdBinary, want: exe},
		{name: "kube executable", value: exe, lookup: KubeAPIServerBinary, want: exe},
		{name: "missing", value: filepath.Join(dir, "nope"), lookup: EtcdBinary, wantMsg: "TALON_ETCD_BIN="},
		{name: "directory", value: dir, lookup: KubeAPIServerBinary, wantMsg: "TALON_KUBE_APISERVER_BIN="},
		{name: "not executable", value: notExe, lookup: EtcdBinary, wantMsg: "not executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvEtcdBin, tt.value)
			t.Setenv(EnvKubeAPIServerBin, tt.value)
			var got string
			msg := runRecorded(func(tb testing.TB) { got = tt.lookup(tb) })
			if tt.want != "" {
				if msg != "" || got != tt.want {
					t.Fatalf("lookup = %q (fatal %q), want %q", got, msg, tt.want)
				}
				return
			}
			if msg == "" {
				t.Fatalf("lookup of %q returned %q, want a fatal error", tt.value, got)
			}
			if !strings.Contains(msg, tt.wantMsg) || !strings.Contains(msg, tt.value) {
				t.Errorf("fatal message %q should name %q and contain %q", msg, tt.value, tt.wantMsg)
			}
		})
	}
}

func TestBuildScriptCached(t *testing.T) {
	SkipIfShort(t)
	// Under `make test` the binaries were built before the tests ran, so
	// this is the warm path: the script must find them and print the same
	// directory both times. When the binaries come from elsewhere, running
	// the script could mean a cold multi-minute build inside a test.
	if p := os.Getenv(EnvEtcdBin); p != "" {
		script, err := buildScript()
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", script, "--print-dir").Output()
		if err != nil {
			t.Fatalf("%s --print-dir: %v", script, err)
		}
		if want := strings.TrimSpace(string(out)); filepath.Dir(p) != want {
			t.Skipf("%s=%s is not in the script's cache %s", EnvEtcdBin, p, want)
		}
	}
	dir1, err := buildServers()
	if err != nil {
		t.Fatal(err)
	}
	dir2, err := buildServers()
	if err != nil {
		t.Fatal(err)
	}
	if dir1 != dir2 {
		t.Fatalf("build-servers.sh printed %q then %q, want the same directory", dir1, dir2)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := checkExecutable(filepath.Join(dir1, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
