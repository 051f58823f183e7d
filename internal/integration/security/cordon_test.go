package security

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// capture is a listener that counts every connection and byte it gets:
// the address a lying worker advertises as its admin listener.
type capture struct {
	ln           net.Listener
	conns, bytes atomic.Int64
	wg           sync.WaitGroup
}

func startCapture(t *testing.T) *capture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{ln: ln}
	c.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.conns.Add(1)
			c.wg.Go(func() {
				defer conn.Close()
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 4096)
				for {
					n, err := conn.Read(buf)
					c.bytes.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); c.wg.Wait() })
	return c
}

// TestCordonNeverGoesToAWorkerAddress is issue 37's reproduction on real
// processes with mutual TLS: w-2 advertises a capture server as its admin
// address, w-3 advertises w-1's. `talonctl nodes cordon|drain|uncordon`
// go to the coordinator only: the capture server receives nothing (no
// connection, so no token), each command acts on the worker named and no
// other. On the old code talonctl posted the operator's token to the
// capture server, printed "node/w-2 cordoned" and exited 0, and
// `cordon w-3` cordoned w-1.
func TestCordonNeverGoesToAWorkerAddress(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(tokens, []byte("ops:read,operate,metrics:"+talontest.OpsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctlAddr := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctlAddr, talontest.FreeAddr(t),
		append(p.Args(t, pki.RoleCoordinator, "coord"), "--admin-token-file", tokens)...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	cpt := startCapture(t)
	blobs := t.TempDir()
	w1Admin := talontest.FreeAddr(t)
	advertise := map[string]string{"w-1": "", "w-2": cpt.ln.Addr().String(), "w-3": w1Admin}
	procs := map[string]*talontest.Proc{}
	for _, id := range []string{"w-1", "w-2", "w-3"} {
		admin := talontest.FreeAddr(t)
		if id == "w-1" {
			admin = w1Admin
		}
		extra := append(p.Args(t, pki.RoleWorker, id), "--admin-token-file", tokens)
		if a := advertise[id]; a != "" {
			extra = append(extra, "--admin-advertise", a)
		}
		procs[id] = talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), admin, []string{ctlAddr}, blobs, t.TempDir(), extra...)...)
	}
	all := []string{"w-1", "w-2", "w-3"}
	testsupport.WaitFor(t, 30*time.Second, "three eligible workers", func() bool { return slices.Equal(talontest.EligibleOn(t, coord), all) })
	servers := []string{"http://" + coord.Admin}
	cordoned := func() []string {
		l, err := talontest.OpsAPI(t, coord).Nodes(context.Background(), apiv1NodeFilterWorkers, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range l.Items {
			if n.Cordon != nil {
				ids = append(ids, n.NodeID)
			}
		}
		return ids
	}

	if code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "cordon", "w-2"); code != 0 || stdout != "node/w-2 cordoned\n" {
		t.Fatalf("cordon w-2: exit %d\n%s\n%s", code, stdout, stderr)
	}
	testsupport.WaitFor(t, 5*time.Second, "w-2 out of placement", func() bool { return slices.Equal(talontest.EligibleOn(t, coord), []string{"w-1", "w-3"}) })
	if got := cordoned(); !slices.Equal(got, []string{"w-2"}) {
		t.Fatalf("cordoned after cordon w-2: %v, want [w-2]", got)
	}
	if code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "cordon", "w-3"); code != 0 || stdout != "node/w-3 cordoned\n" {
		t.Fatalf("cordon w-3: exit %d\n%s\n%s", code, stdout, stderr)
	}
	testsupport.WaitFor(t, 5*time.Second, "w-3 out of placement, w-1 in", func() bool { return slices.Equal(talontest.EligibleOn(t, coord), []string{"w-1"}) })
	if got := cordoned(); !slices.Equal(got, []string{"w-2", "w-3"}) {
		t.Fatalf("cordoned after cordon w-3: %v, want [w-2 w-3] (w-3 advertises w-1's admin address)", got)
	}
	if code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "drain", "w-2", "--drain-timeout", "60s"); code != 0 || stdout != "node/w-2 drained\n" {
		t.Fatalf("drain w-2: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "uncordon", "w-2", "w-3"); code != 0 || stdout != "node/w-2 uncordoned\nnode/w-3 uncordoned\n" {
		t.Fatalf("uncordon: exit %d\n%s\n%s", code, stdout, stderr)
	}
	testsupport.WaitFor(t, 5*time.Second, "all back in placement", func() bool { return slices.Equal(talontest.EligibleOn(t, coord), all) })
	// A worker's own admin listener takes no write, with the operate
	// token or without, and a cross-site one is refused first.
	for _, tc := range []struct {
		token string
		hdr   http.Header
		want  int
	}{
		{talontest.OpsToken, http.Header{apiv1.HeaderRequest: {"1"}}, http.StatusNotFound},
		{"", http.Header{apiv1.HeaderRequest: {"1"}}, http.StatusNotFound},
		{talontest.OpsToken, http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
	} {
		if status, body := talontest.Post(t, procs["w-1"], "/api/v1/cordon?persist=true", tc.token, tc.hdr); status != tc.want {
			t.Fatalf("POST to w-1's admin listener (token %v, %v): %d %s, want %d", tc.token != "", tc.hdr, status, body, tc.want)
		}
	}
	time.Sleep(time.Second)
	if got := cordoned(); len(got) != 0 || !slices.Equal(talontest.EligibleOn(t, coord), all) {
		t.Fatalf("after POSTs to a worker's listener: cordoned %v, eligible %v", got, talontest.EligibleOn(t, coord))
	}
	// Several heartbeats later, the capture server still saw nothing.
	time.Sleep(time.Second)
	if n, b := cpt.conns.Load(), cpt.bytes.Load(); n != 0 || b != 0 {
		t.Fatalf("the address w-2 advertises got %d connections, %d bytes; want none", n, b)
	}
	t.Logf("cordon, drain and uncordon through the coordinator: the capture server got 0 connections; only the workers named changed")
}

// apiv1NodeFilterWorkers lists workers only.
var apiv1NodeFilterWorkers = apiv1.NodeFilter{Role: "worker"}
