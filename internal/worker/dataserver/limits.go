package dataserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/netlimit"
)

// clientRates is a token bucket per client (clientOf), of perSecond
// tokens a second and a burst of twice that, in a netlimit.Buckets of at
// most maxLimiters clients: past that, those idle for a minute go first,
// then the least recently used (a client dropped starts with a full burst
// again; a flood of new clients no longer resets every other's bucket).
type clientRates struct{ b *netlimit.Buckets[string] }

func newClientRates(perSecond float64) *clientRates {
	return &clientRates{netlimit.NewBuckets[string](rate.Limit(perSecond), int(max(2*perSecond, 1)), maxLimiters, time.Minute)}
}

// allow takes n tokens of who's bucket.
func (c *clientRates) allow(who string, n int) bool { return c.b.AllowN(who, time.Now(), n) }

// clientOf names the client of r: its certificate's common name (the node
// ID) over mutual TLS, whatever address it comes from, else its remote
// host.
func clientOf(r *http.Request) string {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return "cn:" + r.TLS.PeerCertificates[0].Subject.CommonName
	}
	who, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return who
}

// stat returns the object's size and version for req: revalidated with
// the store when the client asked for it (fresh) or asked for a version
// the worker's cached answer does not name; 412 when the store holds
// another version than the one asked for. Every stat that goes to the
// store (fresh, such a version, or an object whose answer is not cached,
// as a missing key's never is) takes a token of the client's
// StoreReadRate first: a client cannot turn its requests into as many
// store requests (500 fresh=1 reads were 500 HEADs).
func (s *Server) stat(ctx context.Context, r *http.Request, req *request) (blob.Info, *apiError) {
	if !req.fresh {
		if info, ok := s.cfg.Cache.CachedStat(req.key); ok && (req.version == "" || info.Version == req.version) {
			return info, nil
		}
	}
	if !s.storeReads.allow(clientOf(r), 1) {
		return blob.Info{}, &apiError{status: http.StatusTooManyRequests, code: datav1.CodeResourceExhausted, retryAfter: true,
			msg: fmt.Sprintf("reads that go to the blob store (fresh=1, a version= other than the one this worker knows, an object it has not looked up) are limited to %g per second for each client: read without fresh=1, or retry later", s.cfg.StoreReadRate)}
	}
	var info blob.Info
	var err error
	if req.fresh {
		info, err = s.cfg.Cache.Revalidate(ctx, req.key)
	} else if info, err = s.cfg.Cache.Stat(ctx, req.key); err == nil && req.version != "" && info.Version != req.version {
		info, err = s.cfg.Cache.Revalidate(ctx, req.key)
	}
	if err != nil {
		return info, s.mapErr(ctx, req.key, err)
	}
	if req.version != "" && info.Version != req.version {
		return info, &apiError{status: http.StatusPreconditionFailed, code: datav1.CodeVersionChanged, objectVersion: info.Version,
			msg: fmt.Sprintf("object %q is at version %q in the store, not %q: read it again", req.key, info.Version, req.version)}
	}
	return info, nil
}
