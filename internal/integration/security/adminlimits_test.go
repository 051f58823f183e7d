package security

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// Tokens of the admin-listener tests: an operator, Prometheus (metrics
// only) and a viewer (read only).
const (
	viewerToken = "viewer-token-5c2e81"
)

// startTokenCoordinator runs a coordinator whose admin listener takes
// the operator's, Prometheus's and the viewer's tokens, logging at info.
func startTokenCoordinator(t *testing.T, env []string, extra ...string) *talontest.Proc {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	text := "ops:read,operate,metrics:" + talontest.OpsToken + "\nprometheus:metrics:" + talontest.MetricsToken + "\nviewer:read:" + viewerToken + "\n"
	if err := os.WriteFile(tokens, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--admin-token-file", tokens, "--log-level", "info"}, extra...)
	coord := talontest.StartWithEnv(t, "coordinator", env, talontest.CoordinatorArgs("coord", talontest.FreeAddr(t), talontest.FreeAddr(t), args...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	return coord
}

// fromAddr is an HTTP client whose connections come from the loopback
// address src (127.0.0.x).
func fromAddr(t *testing.T, src string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func send(hc *http.Client, method, url, token string) (int, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if method == http.MethodPost {
		req.Header.Set(apiv1.HeaderRequest, "1")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestMetricsTokenCannotFloodTheLog: a metrics-scope token that POSTs
// cordons of a 4 KiB node ID from one address, as fast as four
// connections go for 3 s, makes the coordinator log one audit line (the
// ID quoted and cut, its length noted) and counts the rest, where it
// wrote a 4 KiB warn line per request (21 MB in 5 s).
func TestMetricsTokenCannotFloodTheLog(t *testing.T) {
	talontest.SkipShort(t)
	coord := startTokenCoordinator(t, nil)
	url := "http://" + coord.Admin + apiv1.NodeActionPath("w\x1b[2J"+strings.Repeat("A", 4096), apiv1.SuffixCordon)
	before := len(coord.Out.String())
	var (
		wg       sync.WaitGroup
		sent     atomic.Int64
		refused  atomic.Int64
		deadline = time.Now().Add(3 * time.Second)
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := fromAddr(t, "127.0.0.1")
			for time.Now().Before(deadline) {
				st, _, err := send(hc, http.MethodPost, url, talontest.MetricsToken)
				if err != nil {
					t.Error(err)
					return
				}
				sent.Add(1)
				if st == http.StatusForbidden || st == http.StatusTooManyRequests {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if refused.Load() != sent.Load() {
		t.Fatalf("%d of %d writes of a metrics token not refused", sent.Load()-refused.Load(), sent.Load())
	}
	out := coord.Out.String()[before:]
	audits := strings.Count(out, "audit=true")
	t.Logf("%d refused writes: %d audit lines, %d bytes of log", sent.Load(), audits, len(out))
	if audits > 1 || len(out) > 64<<10 {
		t.Fatalf("%d refused writes of one token wrote %d audit lines and %d bytes of log, want at most 1 line and 64 KiB:\n%s",
			sent.Load(), audits, len(out), talontest.Tail(out, 3000))
	}
	if audits == 1 && (!strings.Contains(out, "(4") || strings.Contains(out, "\x1b")) {
		t.Fatalf("the audit line carries the raw path:\n%.3000s", out)
	}
}

// TestWatchSlotsPerToken: one token spread over three addresses holds at
// most a quarter of the coordinator's 64 event-watch slots (16; it held
// them all, 8 per address), the next refused with 429 naming the limit,
// while another token's watch is served.
func TestWatchSlotsPerToken(t *testing.T) {
	talontest.SkipShort(t)
	coord := startTokenCoordinator(t, nil)
	watch := "http://" + coord.Admin + apiv1.PathEvents + "?watch=true&node=nobody&timeoutSeconds="
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	// 8 watches from each of 127.0.0.2 and .3: the per-address share of
	// both, 16 in all.
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		hc := fromAddr(t, src)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, watch+"30", nil)
				req.Header.Set("Authorization", "Bearer "+talontest.OpsToken)
				if resp, err := hc.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
	}
	opened := time.Now()
	testsupport.WaitFor(t, 10*time.Second, "16 watches open", func() bool {
		// A build without the gauge (before it, or the gauge renamed):
		// two seconds are plenty for 16 loopback requests.
		n := openWatches(t, coord)
		return n >= 16 || (n < 0 && time.Since(opened) > 2*time.Second)
	})
	third := fromAddr(t, "127.0.0.4")
	start := time.Now()
	st, body, err := send(third, http.MethodGet, watch+"2", talontest.OpsToken)
	if err != nil {
		t.Fatal(err)
	}
	if st != http.StatusTooManyRequests || !strings.Contains(body, "the most one token may") || time.Since(start) > time.Second {
		t.Fatalf("a 17th watch of one token from a third address: %d after %s: %s; want 429 naming the per-token limit", st, time.Since(start), body)
	}
	st, body, err = send(third, http.MethodGet, watch+"1", viewerToken)
	if err != nil || st != http.StatusOK {
		t.Fatalf("another token's watch: %d %v %s, want 200", st, err, body)
	}
}

// openWatches reads the coordinator's open event watches from /metrics.
func openWatches(t *testing.T, p *talontest.Proc) int {
	for _, line := range strings.Split(scrape(t, p), "\n") {
		if v, ok := strings.CutPrefix(line, "talon_admin_event_watches "); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	return -1
}

func scrape(t *testing.T, p *talontest.Proc) string {
	st, body, err := send(http.DefaultClient, http.MethodGet, "http://"+p.Admin+apiv1.PathMetrics, talontest.MetricsToken)
	if err != nil || st != http.StatusOK {
		return ""
	}
	return body
}

// TestOTLPPasswordNotLogged: a coordinator exporting spans to an OTLP
// endpoint with a password in its userinfo never prints the password
// (the start-up line showed the endpoint as given).
func TestOTLPPasswordNotLogged(t *testing.T) {
	talontest.SkipShort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	const password = "otlp-pa55w0rd-e3d1"
	env := []string{fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://talon:%s@%s", password, ln.Addr()), "OTEL_BSP_SCHEDULE_DELAY=100"}
	coord := startTokenCoordinator(t, env)
	out := coord.Out.String()
	if !strings.Contains(out, "tracing on") {
		t.Fatalf("no tracing start-up line:\n%s", talontest.Tail(out, 3000))
	}
	coord.Stop(t, 10*time.Second)
	if out := coord.Out.String(); strings.Contains(out, password) {
		t.Fatalf("the OTLP endpoint's password is in the output:\n%s", talontest.Tail(out, 3000))
	}
}
