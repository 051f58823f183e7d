package admin

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
)

// forgedGets sends n requests to path, each with another forged
// X-Forwarded-For, and returns how many were rate limited.
func forgedGets(t *testing.T, e *env, path string, n int, wantHSTS bool) int {
	t.Helper()
	return forwardedGets(t, e, path, n, wantHSTS, func(h http.Header, i int) {
		h.Set("X-Forwarded-For", "203.0.113."+itoa(i+1))
		h.Set("Forwarded", "for=198.51.100."+itoa(i+1))
	})
}

// forwardedGets sends n GETs of path with the forwarding headers set(i)
// writes, and returns how many were rate limited.
func forwardedGets(t *testing.T, e *env, path string, n int, wantHSTS bool, set func(h http.Header, i int)) int {
	t.Helper()
	limited := 0
	for i := range n {
		req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		set(req.Header, i)
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if hsts := resp.Header.Get("Strict-Transport-Security") != ""; hsts != wantHSTS {
			t.Fatalf("Strict-Transport-Security set %v, want %v (X-Forwarded-Proto: https, proxy trusted %v)", hsts, wantHSTS, wantHSTS)
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
			if resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("429 without Retry-After: 1: %v", resp.Header)
			}
		}
	}
	return limited
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestForwardedHeadersFromUntrustedPeers: from a peer that is not a
// trusted proxy, forged X-Forwarded-For and Forwarded headers are ignored:
// every request counts against the peer (so rotating forged addresses does
// not escape the rate limit), and the log names the peer, never a forged
// address. Probes are never limited.
func TestForwardedHeadersFromUntrustedPeers(t *testing.T) {
	adminCfg := exposeAll()
	adminCfg.RateLimit = 5 // burst 10
	e := startCoordinator(t, envOptions{admin: adminCfg})
	if limited := forgedGets(t, e, apiv1.PathCluster, 30, false); limited < 15 {
		t.Fatalf("%d of 30 requests with rotating forged addresses limited, want at least 15: the peer's bucket", limited)
	}
	logs := e.logs.String()
	if strings.Contains(logs, "203.0.113.") || strings.Contains(logs, "198.51.100.") {
		t.Fatal("a forged forwarded address reached the log")
	}
	if !strings.Contains(logs, "client=127.0.0.1") {
		t.Fatal("refusals are not logged with the peer as the client")
	}
	if r := e.get(t, apiv1.PathHealthz); r.status != http.StatusOK {
		t.Fatalf("/healthz while the client is limited: %d", r.status)
	}
}

// TestForwardedHeadersFromATrustedProxy: behind a trusted proxy each
// forwarded client has its own bucket and is logged as itself.
func TestForwardedHeadersFromATrustedProxy(t *testing.T) {
	adminCfg := exposeAll()
	adminCfg.RateLimit = 5
	adminCfg.TrustedProxies = []string{"127.0.0.1"}
	e := startCoordinator(t, envOptions{admin: adminCfg})
	for name, set := range map[string]func(h http.Header, i int){
		"X-Forwarded-For": func(h http.Header, i int) { h.Set("X-Forwarded-For", "203.0.113."+itoa(i+1)) },
		"Forwarded":       func(h http.Header, i int) { h.Set("Forwarded", "for=203.0.113."+itoa(100+i)) },
	} {
		if limited := forwardedGets(t, e, apiv1.PathCluster, 30, true, set); limited != 0 {
			t.Fatalf("%s: %d of 30 requests of 30 distinct forwarded clients limited, want 0", name, limited)
		}
	}
	if !strings.Contains(e.logs.String(), "client=203.0.113.") {
		t.Fatal("the forwarded client is not logged as the client")
	}
}

// TestForgedForwardingBesideTheProxysHeader: a trusted proxy writes
// Forwarded for its one client, who adds an X-Forwarded-For of its own,
// another address each time: the requests are one client's, limited as
// such (the old code took X-Forwarded-For first: 400 of 400 got 200).
func TestForgedForwardingBesideTheProxysHeader(t *testing.T) {
	adminCfg := exposeAll()
	adminCfg.RateLimit = 5 // burst 10
	adminCfg.TrustedProxies = []string{"127.0.0.1"}
	e := startCoordinator(t, envOptions{admin: adminCfg})
	limited := forwardedGets(t, e, apiv1.PathCluster, 30, true, func(h http.Header, i int) {
		h.Set("Forwarded", "for=203.0.113.5")
		h.Set("X-Forwarded-For", "198.51.100."+itoa(i+1))
	})
	if limited < 15 {
		t.Fatalf("%d of 30 requests with a rotating forged X-Forwarded-For limited, want at least 15: one client's bucket", limited)
	}
}

func TestClientIdentity(t *testing.T) {
	trusted := clientIdentity{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	tests := []struct {
		name, remote string
		hdr          map[string]string
		want         string
		https        bool
	}{
		{"no proxy", "192.0.2.1:5000", map[string]string{"X-Forwarded-For": "203.0.113.9"}, "192.0.2.1", false},
		{"trusted proxy", "10.1.1.1:5000", map[string]string{"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}, "203.0.113.9", true},
		{"chain of trusted proxies", "10.1.1.1:5000", map[string]string{"X-Forwarded-For": "203.0.113.9, 10.2.2.2"}, "203.0.113.9", false},
		{"client claims before the first untrusted hop are ignored", "10.1.1.1:5000", map[string]string{"X-Forwarded-For": "1.2.3.4, 203.0.113.9"}, "203.0.113.9", false},
		{"Forwarded", "10.1.1.1:5000", map[string]string{"Forwarded": `for="[2001:db8::7]:443";proto=https`}, "2001:db8::7", true},
		{"garbage stops the walk at the proxy", "10.1.1.1:5000", map[string]string{"X-Forwarded-For": "not-an-ip"}, "10.1.1.1", false},
		{"no header", "10.1.1.1:5000", nil, "10.1.1.1", false},
		{"both headers naming one client", "10.1.1.1:5000", map[string]string{"Forwarded": "for=203.0.113.9", "X-Forwarded-For": "203.0.113.9"}, "203.0.113.9", false},
		{"a forged X-Forwarded-For beside the proxy's Forwarded", "10.1.1.1:5000", map[string]string{"Forwarded": "for=203.0.113.9", "X-Forwarded-For": "198.51.100.77"}, "10.1.1.1", false},
		{"a forged Forwarded beside the proxy's X-Forwarded-For", "10.1.1.1:5000", map[string]string{"Forwarded": "for=198.51.100.77", "X-Forwarded-For": "203.0.113.9"}, "10.1.1.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			got, https := trusted.client(r)
			if got.String() != tt.want || https != tt.https {
				t.Fatalf("client = %s https %v, want %s %v", got, https, tt.want, tt.https)
			}
		})
	}
}

func TestClientLimiterBounded(t *testing.T) {
	clk := testsupport.NewFakeClock(time.Now())
	cl := newClientLimiter(1, clk.Now)
	for i := range maxLimited + 10 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		cl.allow(a)
	}
	if n := cl.buckets.Len(); n > maxLimited {
		t.Fatalf("%d limiters kept, bound %d", n, maxLimited)
	}
	if newClientLimiter(0, clk.Now) != nil || !(*clientLimiter)(nil).allow(netip.Addr{}) {
		t.Fatal("a zero rate does not turn the limit off")
	}
}

// TestNoTokenWarningOnLoopback: an admin listener without tokens warns
// only when it is reachable from other hosts.
func TestNoTokenWarningOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7401}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 7401}, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 7401}, false},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 7401}, false},
	} {
		if got := loopback(tc.addr); got != tc.want {
			t.Errorf("loopback(%v) = %t, want %t", tc.addr, got, tc.want)
		}
	}
}

func TestForwardedPairs(t *testing.T) {
	type kv struct{ k, v string }
	tests := []struct {
		name   string
		values []string // one Forwarded header each
		want   []kv
	}{
		{"none", nil, nil},
		{"one pair", []string{"for=192.0.2.1"}, []kv{{"for", "192.0.2.1"}}},
		{"pairs of one element", []string{`for="[2001:db8::7]:443";proto=https;by=10.0.0.1`}, []kv{{"for", `"[2001:db8::7]:443"`}, {"proto", "https"}, {"by", "10.0.0.1"}}},
		{"elements in order", []string{"for=192.0.2.1, for=198.51.100.2;proto=http"}, []kv{{"for", "192.0.2.1"}, {"for", "198.51.100.2"}, {"proto", "http"}}},
		{"headers in order", []string{"for=192.0.2.1", "For=192.0.2.2;PROTO=https"}, []kv{{"for", "192.0.2.1"}, {"For", "192.0.2.2"}, {"PROTO", "https"}}},
		{"outer space trimmed, inner kept", []string{"  for= 192.0.2.1 ;proto =https"}, []kv{{"for", " 192.0.2.1"}, {"proto ", "https"}}},
		{"value may hold =", []string{"for=a=b"}, []kv{{"for", "a=b"}}},
		{"pairs without = skipped", []string{"for;;proto=https,, garbage"}, []kv{{"proto", "https"}}},
		{"empty value kept", []string{"for="}, []kv{{"for", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add("Forwarded", v)
			}
			var got []kv
			for k, v := range forwardedPairs(h) {
				got = append(got, kv{k, v})
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("forwardedPairs(%q) = %q, want %q", tt.values, got, tt.want)
			}
		})
	}
}

// FuzzForwardedPairs: whatever the header, every pair is one piece of an
// element (no "," or ";" in it), its key has no outer space, stopping
// early stops, and forwardedFor finds exactly one hop per for= pair.
func FuzzForwardedPairs(f *testing.F) {
	for _, s := range []string{"for=192.0.2.1", `for="[2001:db8::7]:443";proto=https`, "for=a, for=b;by=c", " FOR = x ;;,", "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := http.Header{"Forwarded": {s}}
		n, fors := 0, 0
		for k, v := range forwardedPairs(h) {
			n++
			if strings.ContainsAny(k+v, ",;") || k != strings.TrimLeft(k, " \t") || v != strings.TrimRight(v, " \t") {
				t.Fatalf("pair %q=%q of %q is not one trimmed piece of an element", k, v, s)
			}
			if strings.EqualFold(k, "for") {
				fors++
			}
		}
		if n > strings.Count(s, "=") {
			t.Fatalf("%d pairs from %d '=' in %q", n, strings.Count(s, "="), s)
		}
		if got := len(forwardedHops(h)); got != fors {
			t.Fatalf("forwardedHops found %d hops, want %d (for= pairs of %q)", got, fors, s)
		}
		seen := 0
		for range forwardedPairs(h) {
			seen++
			break
		}
		if seen > 1 {
			t.Fatal("forwardedPairs yielded after yield returned false")
		}
	})
}

// TestWideTrustedProxiesWarned: a trusted range wider than a /8 (or ::/32),
// 0.0.0.0/0 above all, is warned about at start; a narrow one is not.
func TestWideTrustedProxiesWarned(t *testing.T) {
	for _, tc := range []struct {
		ranges []string
		warn   bool
	}{{[]string{"0.0.0.0/0"}, true}, {[]string{"::/0"}, true}, {[]string{"10.0.0.0/7"}, true}, {[]string{"10.0.0.0/8", "192.168.1.10", "2001:db8::/48"}, false}} {
		adminCfg := exposeAll()
		adminCfg.TrustedProxies = tc.ranges
		e := startCoordinator(t, envOptions{admin: adminCfg})
		if got := strings.Contains(e.logs.String(), "admin-trusted-proxies names a range wider"); got != tc.warn {
			t.Errorf("trusted %v: warned %v, want %v", tc.ranges, got, tc.warn)
		}
	}
}
