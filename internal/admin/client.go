package admin

import (
	"iter"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/netlimit"
)

// clientIdentity tells who sent a request (ADR 0001 section 11): the TCP
// peer, unless the peer is a configured trusted proxy, in which case the
// nearest untrusted address of its forwarding chain (X-Forwarded-For or
// Forwarded's for=; see client for both). Forwarded headers from any other peer are ignored:
// never logged as the client, never used for rate limiting.
type clientIdentity struct {
	trusted []netip.Prefix
}

func (ci clientIdentity) isTrusted(a netip.Addr) bool {
	for _, p := range ci.trusted {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// client returns the address a request is attributed to and whether it
// came through a trusted proxy's https (X-Forwarded-Proto / proto=).
//
// From a trusted proxy, each forwarding header gives a chain of hops; the
// client is the right-most hop that is not itself a trusted proxy: the
// hops to its left are the client's own claims. A proxy writes one of the
// two headers and passes the other through from its client, so when both
// are present and name different clients, one of them is the client's
// forgery and nothing tells which: the request is attributed to the
// proxy itself. (Before, X-Forwarded-For won, and a client behind a
// proxy that writes Forwarded rotated its own X-Forwarded-For past the
// rate limit.)
func (ci clientIdentity) client(r *http.Request) (addr netip.Addr, forwardedTLS bool) {
	peer := peerAddr(r.RemoteAddr)
	if !peer.IsValid() || !ci.isTrusted(peer) {
		return peer, false
	}
	xff, fwd := ci.nearestUntrusted(peer, xffHops(r.Header)), ci.nearestUntrusted(peer, forwardedHops(r.Header))
	switch {
	case len(r.Header.Values("X-Forwarded-For")) == 0:
		addr = fwd
	case len(r.Header.Values("Forwarded")) == 0, xff == fwd:
		addr = xff
	default:
		addr = peer // two headers, two different clients: trust neither
	}
	proto := r.Header.Get("X-Forwarded-Proto")
	if proto == "" {
		proto = forwardedParam(r.Header, "proto")
	}
	return addr, strings.EqualFold(strings.TrimSpace(proto), "https")
}

// nearestUntrusted walks chain from the nearest hop back and returns the
// first address that is not a trusted proxy (peer when the chain is empty
// or a hop does not parse).
func (ci clientIdentity) nearestUntrusted(peer netip.Addr, chain []netip.Addr) netip.Addr {
	addr := peer
	for i := len(chain) - 1; i >= 0; i-- {
		a := chain[i]
		if !a.IsValid() {
			break
		}
		addr = a
		if !ci.isTrusted(a) {
			break
		}
	}
	return addr
}

func peerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// xffHops returns the hops of X-Forwarded-For (all headers, in order);
// forwardedHops those of Forwarded's for= parameters. Entries that do not
// parse are returned invalid, which ends the walk.
func xffHops(h http.Header) []netip.Addr {
	var out []netip.Addr
	for _, v := range h.Values("X-Forwarded-For") {
		for part := range strings.SplitSeq(v, ",") {
			out = append(out, parseHop(part))
		}
	}
	return out
}

func forwardedHops(h http.Header) []netip.Addr {
	var out []netip.Addr
	for k, val := range forwardedPairs(h) {
		if strings.EqualFold(k, "for") {
			out = append(out, parseHop(val))
		}
	}
	return out
}

// forwardedParam returns the last value of param in Forwarded, unquoted.
func forwardedParam(h http.Header, param string) string {
	var last string
	for k, val := range forwardedPairs(h) {
		if strings.EqualFold(k, param) {
			last = strings.Trim(val, `"`)
		}
	}
	return last
}

// forwardedPairs yields the key=value pairs of every Forwarded header
// (RFC 7239), in order: header after header, element (split at ",") after
// element, pair (split at ";") after pair. Each pair is trimmed of
// surrounding space and cut at its first "=" into key and value, both
// otherwise as written (quotes kept); a pair without "=" is skipped. It is
// the one place that splits Forwarded. Quoted strings are not unescaped, and a "," or ";"
// inside one still splits: the parameters Talon reads (for, proto) never
// hold either.
func forwardedPairs(h http.Header) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, v := range h.Values("Forwarded") {
			for elem := range strings.SplitSeq(v, ",") {
				for kv := range strings.SplitSeq(elem, ";") {
					k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
					if ok && !yield(k, val) {
						return
					}
				}
			}
		}
	}
}

// parseHop parses one forwarding hop: an address, optionally quoted, in
// brackets or with a port ("192.0.2.7", "\"[2001:db8::1]:443\"").
func parseHop(s string) netip.Addr {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, _ := netip.ParseAddr(s)
	return a.Unmap()
}

// maxLimited bounds the clients whose rate limiters are kept; past it the
// idlest are dropped (a dropped client starts with a full bucket).
const maxLimited = 10000

// clientLimiter is a token bucket per client address.
type clientLimiter struct {
	now     func() time.Time
	buckets *netlimit.Buckets[netip.Addr]
}

func newClientLimiter(rps int, now func() time.Time) *clientLimiter {
	if rps <= 0 {
		return nil
	}
	return &clientLimiter{now: now, buckets: netlimit.NewBuckets[netip.Addr](rate.Limit(rps), 2*rps, maxLimited, time.Minute)}
}

// allow reports whether client may make a request now; nil allows all.
func (cl *clientLimiter) allow(client netip.Addr) bool {
	if cl == nil {
		return true
	}
	ok, _ := cl.buckets.Allow(client, cl.now())
	return ok
}
