package security

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// procFDs and procRSS read a process's open descriptors and resident
// memory from /proc.
func procFDs(t *testing.T, p *talontest.Proc) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func procRSS(t *testing.T, p *talontest.Proc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestUnauthenticatedFloodsBounded: plain TCP connections that never
// authenticate (never finish a TLS handshake, never send a request) flood
// a coordinator's control and admin ports and a worker's data and admin
// ports from eight source addresses, 2,000 per port. The processes keep
// their descriptors and memory bounded (the old control port took them to
// 20,000 descriptors through its admin port, and refused 12 of 14 fresh
// clients), and fresh authenticated clients from another address are
// served on every port all along.
func TestUnauthenticatedFloodsBounded(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	ctl, cadmin := talontest.FreeAddr(t), talontest.FreeAddr(t)
	limits := []string{"--max-connections", "1000"}
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, cadmin, append(limits, p.Args(t, pki.RoleCoordinator, "coord")...)...)...)
	testsupport.WaitFor(t, 30*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	data, wadmin := talontest.FreeAddr(t), talontest.FreeAddr(t)
	w := talontest.Start(t, "worker-1", talontest.WorkerArgs("worker-1", data, wadmin, []string{ctl}, t.TempDir(), t.TempDir(), append(limits, p.Args(t, pki.RoleWorker, "worker-1")...)...)...)
	testsupport.WaitFor(t, 30*time.Second, "worker ready", func() bool { return talontest.Ready(t, w) })
	fdsBefore, rssBefore := procFDs(t, coord)+procFDs(t, w), procRSS(t, coord)+procRSS(t, w)

	// The flood: 250 connections from each of 127.0.0.2..9 to each port,
	// held open and silent.
	var (
		mu    sync.Mutex
		flood []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range flood {
			c.Close()
		}
		mu.Unlock()
	})
	for _, addr := range []string{ctl, cadmin, data, wadmin} {
		for src := 2; src <= 9; src++ {
			wg.Go(func() {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(src))}, Timeout: 5 * time.Second}
				for range 250 {
					c, err := d.Dial("tcp", addr)
					if err != nil {
						continue
					}
					mu.Lock()
					flood = append(flood, c)
					mu.Unlock()
				}
			})
		}
	}

	// Meanwhile and after: fresh authenticated clients on every port.
	cli := p.Source(t, pki.RoleClient, "reader")
	toCoord := cli.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
	toWorker := cli.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: toWorker}}
	attempts, failed := 0, map[string]int{}
	var first []string
	probe := func() {
		check := func(port string, err error) {
			attempts++
			if err != nil {
				failed[port]++
				if len(first) < 3 {
					first = append(first, port+": "+err.Error())
				}
			}
		}
		check("control", func() error {
			nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ctl, toCoord)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = protocol.NewConn(nc, protocol.ConnOptions{}).Call(ctx, &protocol.Ping{})
			return err
		}())
		for name, url := range map[string]string{"data": "https://" + data + "/v1/objects/none", "coordinator admin": "http://" + cadmin + "/readyz", "worker admin": "http://" + wadmin + "/readyz"} {
			check(name, func() error {
				resp, err := hc.Get(url)
				if err != nil {
					return err
				}
				resp.Body.Close()
				return nil
			}())
		}
	}
	floodDone := make(chan struct{})
	go func() { wg.Wait(); close(floodDone) }()
	for waiting := true; waiting; {
		select {
		case <-floodDone:
			waiting = false
		default:
		}
		probe()
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	for range 10 {
		probe()
	}
	mu.Lock()
	dialled := len(flood)
	mu.Unlock()
	fds, rss := procFDs(t, coord)+procFDs(t, w), procRSS(t, coord)+procRSS(t, w)
	t.Logf("flood of %d plain connections on 4 ports: authenticated probes %d, failed %v; descriptors %d -> %d, RSS %d -> %d MiB",
		dialled, attempts, failed, fdsBefore, fds, rssBefore>>20, rss>>20)
	if len(failed) > 0 {
		t.Errorf("authenticated clients failed during the flood: %v, first %q", failed, first)
	}
	// Each listener holds at most a quarter of its cap pending (control and
	// data 250 of 1,000, admin 256 of 1,024): about 1,000 in all.
	if fds-fdsBefore > 1100 {
		t.Errorf("descriptors grew by %d under the flood, want at most about 1,000 (the pending budgets)", fds-fdsBefore)
	}
	if rss-rssBefore > 256<<20 {
		t.Errorf("RSS grew by %d MiB under the flood", (rss-rssBefore)>>20)
	}
}
