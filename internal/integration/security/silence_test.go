package security

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// holdData opens a TLS connection to a worker's data port from local IP
// from, as the credential cfg presents, sends a first request and keeps
// the connection when the worker served it (it then counts as
// established). It returns the status of the answer, 0 when the worker
// closed the connection before one, and the connection when it is held.
func holdData(addr, from string, cfg *tls.Config) (int, net.Conn) {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return 0, nil
	}
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte("GET /v1/objects/held HTTP/1.1\r\nHost: talon\r\n\r\n")); err != nil {
		nc.Close()
		return 0, nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		nc.Close()
		return 0, nil
	}
	resp.Body.Close()
	if resp.Close {
		nc.Close()
		return resp.StatusCode, nil
	}
	_ = nc.SetDeadline(time.Time{})
	return resp.StatusCode, nc
}

// flood holds as many data connections on addr as the worker lets
// credential cfg keep, from each local IP of froms, trying at most n per
// IP. It returns the held connections (closed at cleanup) and the
// statuses of the answers.
func flood(t *testing.T, addr string, cfg *tls.Config, n int, froms ...string) (held int, statuses map[int]int) {
	t.Helper()
	statuses = map[int]int{}
	for _, from := range froms {
		for range n {
			st, nc := holdData(addr, from, cfg)
			statuses[st]++
			if nc != nil {
				held++
				t.Cleanup(func() { nc.Close() })
			}
		}
	}
	return held, statuses
}

// blackhole is a data address where nothing answers: every connection is
// reset as soon as it is accepted (an owner whose slots others hold, or
// that a network partition hides, looks the same to a reader).
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestSilencedOwnerIsNoConsent is issue 47's first finding: two
// colluding workers (valid worker credentials, the same wrong bytes,
// vouching for each other) and one honest one. First they take the
// honest worker's data connections with their own credentials (the old
// data port accepted any identity: with --max-connections 64, 32 from
// each of two addresses filled it, so the honest owner could neither
// serve nor vouch, and plain `talon get` exited 0 with the colluders'
// bytes). Now a worker's credential is refused on another worker's data
// port. Then the honest owner is silenced whatever way (its advertised
// address resets every connection): the two colluders are a majority of
// the three owners, but a silent owner is no consent, so get never exits
// 0 with wrong bytes, names the silent owner, and with --source (also
// with --source-vouchers 2) writes the right bytes.
func TestSilencedOwnerIsNoConsent(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	blobs := t.TempDir()
	const size = 6*talontest.BlockSize + 5
	want := talontest.WriteBlob(t, blobs, "big.bin", size, 47)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	honestData := talontest.FreeAddr(t)
	honest := talontest.Start(t, "honest-1", talontest.WorkerArgs("honest-1", honestData, talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(),
		append(p.Args(t, pki.RoleWorker, "honest-1"), "--max-connections", "64")...)...)
	colluder(t, p, ctl, "bad-1", blobs)
	colluder(t, p, ctl, "bad-2", blobs)
	waitWorkers := func(n int) {
		testsupport.WaitFor(t, 30*time.Second, fmt.Sprintf("%d eligible workers", n), func() bool {
			cl, err := coord.API(t).Cluster(context.Background())
			return err == nil && cl.EligibleWorkers == n
		})
	}
	waitWorkers(3)
	f := p.Files(t, pki.RoleClient, "reader")
	creds := []string{"--coordinators", ctl, "--block-size", "1MiB", "--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile, "--timeout", "50s"}
	dir := t.TempDir()
	get := func(t *testing.T, name string, extra ...string) (talontest.Result, bool) {
		out := filepath.Join(dir, name)
		res := talontest.RunTalon(t, nil, append(append([]string{"get", "big.bin", "-o", out}, creds...), extra...)...)
		got, _ := os.ReadFile(out)
		right := bytes.Equal(got, want)
		if res.Code == 0 && !right {
			t.Fatalf("talon get %v: exit 0 with wrong bytes:\n%s", extra, talontest.Tail(res.Stderr, 3000))
		}
		t.Logf("get %v: exit %d, right bytes %t\n%s", extra, res.Code, right, talontest.Tail(res.Stderr, 1500))
		return res, right
	}
	source := []string{"--source", "file://" + blobs}

	t.Run("colluders cannot hold the honest owner's connections", func(t *testing.T) {
		held := 0
		statuses := map[int]int{}
		for i, node := range []string{"bad-1", "bad-2"} {
			cfg := p.Source(t, pki.RoleWorker, node).ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})
			h, st := flood(t, honestData, cfg, 40, fmt.Sprintf("127.0.0.%d", 2+i))
			held += h
			for k, v := range st {
				statuses[k] += v
			}
		}
		t.Logf("the colluders hold %d of the honest worker's 64 data connections (answers by status: %v)", held, statuses)
		if held > 0 || statuses[http.StatusForbidden] == 0 {
			t.Errorf("worker credentials held %d data connections on another worker (answers %v); want every one refused 403", held, statuses)
		}
		// The honest owner answers, so the workers disagree: without the
		// store nobody can tell which side is right (the read fails
		// saying so), with it the store's bytes win.
		if res, _ := get(t, "flood"); res.Code == 0 || !strings.Contains(res.Stderr, "workers disagree") || strings.Contains(res.Stderr, "did not answer") {
			t.Errorf("get with the colluders flooding: exit %d; want a failure that reports the workers' disagreement, no silent owner", res.Code)
		}
		if res, right := get(t, "flood", append(source, "--source-vouchers", "2")...); res.Code != 0 || !right {
			t.Errorf("get --source --source-vouchers 2 with the colluders flooding: exit %d, right bytes %t; want the store's bytes", res.Code, right)
		}
		m := talontest.ScrapeText(t, honest)
		if !strings.Contains(m, `talon_worker_data_connections_refused_total{reason="worker_credential"}`) {
			t.Errorf("no worker_credential refusals counted:\n%s", talontest.GrepLines(m, "refused"))
		}
	})

	// The honest worker is replaced by one whose advertised data address
	// resets every connection: silent, whatever the cause.
	honest.Kill()
	hole := blackhole(t)
	talontest.Start(t, "honest-2", talontest.WorkerArgs("honest-2", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(),
		append(p.Args(t, pki.RoleWorker, "honest-2"), "--advertise", hole)...)...)
	testsupport.WaitFor(t, 30*time.Second, "honest-1 gone, honest-2 in", func() bool {
		ids := talontest.EligibleOn(t, coord)
		return len(ids) == 3 && strings.Contains(strings.Join(ids, ","), "honest-2")
	})
	t.Run("silent owner without the store", func(t *testing.T) {
		res, _ := get(t, "silent")
		if res.Code == 0 {
			t.Fatal("get exited 0 although an owner of every block was silent")
		}
		if !strings.Contains(res.Stderr, "honest-2 did not answer") {
			t.Fatalf("get does not name the silent owner:\n%s", talontest.Tail(res.Stderr, 2000))
		}
	})
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"silent owner with the store", source}, {"silent owner with the store and two vouchers", append(source, "--source-vouchers", "2")}} {
		t.Run(tc.name, func(t *testing.T) {
			res, right := get(t, "silents", tc.extra...)
			if res.Code != 0 || !right {
				t.Fatalf("exit %d, right bytes %t; want the store's bytes", res.Code, right)
			}
			if !strings.Contains(res.Stderr, "honest-2 did not answer") {
				t.Fatalf("get does not name the silent owner:\n%s", talontest.Tail(res.Stderr, 2000))
			}
		})
	}
}

// TestDataConnectionsPerCredential is issue 47's connection budget: one
// client credential holding every data connection it can get on a worker
// (--max-connections 64, from two addresses; before, it held all 64 and
// other clients' reads failed) holds at most its share, a quarter, and
// another credential's read succeeds; a worker's credential is refused
// 403 forbidden. Refusals are counted by reason.
func TestDataConnectionsPerCredential(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	blobs := t.TempDir()
	want := talontest.WriteBlob(t, blobs, "obj.bin", 3*talontest.BlockSize+7, 5)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	data := talontest.FreeAddr(t)
	w := talontest.Start(t, "worker-1", talontest.WorkerArgs("worker-1", data, talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(),
		append(p.Args(t, pki.RoleWorker, "worker-1"), "--max-connections", "64")...)...)
	testsupport.WaitFor(t, 30*time.Second, "worker ready", func() bool { return talontest.Ready(t, w) })

	hog := p.Source(t, pki.RoleClient, "hog").ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})
	held, statuses := flood(t, data, hog, 40, "127.0.0.2", "127.0.0.3")
	t.Logf("one client credential holds %d of 64 data connections (answers by status: %v)", held, statuses)
	if held > 16 {
		t.Errorf("one credential holds %d data connections; want at most 16 (a quarter of 64)", held)
	}
	if held < 16 {
		t.Errorf("one credential holds only %d data connections; want its full share, 16", held)
	}
	f := p.Files(t, pki.RoleClient, "reader")
	out := filepath.Join(t.TempDir(), "out")
	var res talontest.Result
	reads := 0
	for range 5 {
		res = talontest.RunTalon(t, nil, "get", "obj.bin", "-o", out, "--coordinators", ctl, "--block-size", "1MiB", "--verify=false", "--replicas", "1",
			"--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile, "--timeout", "20s")
		if got, _ := os.ReadFile(out); res.Code == 0 && bytes.Equal(got, want) {
			reads++
		}
	}
	t.Logf("another credential's reads: %d of 5 succeeded", reads)
	if reads != 5 {
		t.Fatalf("another credential's reads: %d of 5 succeeded while one credential held its maximum:\n%s", reads, talontest.Tail(res.Stderr, 2000))
	}
	st, nc := holdData(data, "127.0.0.1", p.Source(t, pki.RoleWorker, "worker-2").ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}}))
	if nc != nil || st != http.StatusForbidden {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("a worker credential on another worker's data port: status %d, held %t; want 403 and closed", st, nc != nil)
	}
	m := talontest.ScrapeText(t, w)
	for _, reason := range []string{"connections_per_identity", "worker_credential"} {
		if v := talontest.SumMetric([]byte(m), "talon_worker_data_connections_refused_total", `reason="`+reason+`"`); v < 1 {
			t.Errorf("talon_worker_data_connections_refused_total{reason=%q} = %g, want at least 1:\n%s", reason, v, talontest.GrepLines(m, "refused"))
		}
	}
}
