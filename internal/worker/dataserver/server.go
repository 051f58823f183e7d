package dataserver

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/stats"
)

// DefaultMaxRangeBlocks is the default Config.MaxRangeBlocks.
const DefaultMaxRangeBlocks = 16

// Ownership tells whether this worker owns a block under its current
// placement, and that placement's version. The worker runtime implements
// it; it must be safe for concurrent use and cheap (it is called for every
// block of every request).
type Ownership interface {
	// Owns reports whether this worker is among the owners of
	// datav1.BlockKey(object, block) under the cluster's placement (its
	// placement-replicas setting, never a count a client sends), and the
	// PlacementVersion the answer was computed from.
	Owns(object string, block int64) (owned bool, version uint64)
}

// FirstOwnership is implemented by an Ownership that also tells whether
// this worker is a block's first owner: the one a reader asks first.
// Read-ahead follows the blocks a worker is first owner of, so that with
// placement-replicas 2 or more the blocks readers fetch from their first
// owner elsewhere are neither holes in a sequential read nor loads
// nobody asks this worker for. Without it every owned block counts.
type FirstOwnership interface {
	OwnsFirst(object string, block int64) bool
}

// Defaults of the digest limit.
const (
	// DefaultUnownedDigestRate is the default Config.UnownedDigestRate.
	DefaultUnownedDigestRate = 64
	// DefaultStoreReadRate is the default Config.StoreReadRate (the
	// store-reads-per-client setting's default).
	DefaultStoreReadRate = 256
	// maxLimiters bounds the per-client limiters kept (clientRates).
	maxLimiters = 4096
)

// Config configures New.
type Config struct {
	Cache     *cache.Cache
	Ownership Ownership
	Stats     *stats.Stats
	Logger    *slog.Logger
	// Ready reports whether the worker serves data (false while starting
	// or draining: 503). Nil means always ready.
	Ready func() bool
	// Observe, if set, is told every finished request with operation
	// "get" and outcome "ok" or an error code (metrics.Process.Observe).
	Observe func(operation, outcome string, d time.Duration)
	// MaxRangeBlocks bounds the length parameter to this many blocks;
	// 0 means DefaultMaxRangeBlocks.
	MaxRangeBlocks int
	// UnownedDigestRate bounds the digests of blocks this worker does not
	// own (read from the store, never cached) per second for each client
	// (the certificate's node ID over TLS, else the remote host), with a
	// burst of twice that; 0 means DefaultUnownedDigestRate.
	UnownedDigestRate float64
	// StoreReadRate bounds, per second for each client (as
	// UnownedDigestRate), the requests that make the worker ask the
	// store for an object's size and version: fresh=1, a version= its
	// cached answer does not name, an object it has no answer for (a
	// missing one never has). Burst twice that; 0 means
	// DefaultStoreReadRate. Past it: 429 resource_exhausted.
	StoreReadRate float64
	// ReadAhead is how many blocks after a sequential read's last one
	// the worker starts loading (Cache.Prefetch), of those it owns (see
	// planPrefetch); 0 means DefaultReadAhead, negative none.
	ReadAhead int
	// WarmupRate bounds the block loads a second (misses that fetch from
	// the store, read-ahead included) for WarmupPeriod after New: a new
	// worker's owned blocks are all cold, and their previous owners still
	// hold them. 0 means DefaultWarmupRate, negative no bound.
	WarmupRate float64
	// WarmupPeriod is how long the bound lasts; 0 means
	// DefaultWarmupPeriod.
	WarmupPeriod time.Duration
	// WarmupRefuse answers a read past the rate 503 warming_up, so that
	// the client reads the block from its next owner (placement-replicas
	// 2 or more); false makes the read wait for the rate instead.
	WarmupRefuse bool
	// Clock tells the time for the warm-up; nil means time.Now.
	Clock func() time.Time
}

// DefaultReadAhead is the default Config.ReadAhead, in blocks.
const DefaultReadAhead = 4

// Server is the data listener's handler. It is safe for concurrent use and
// starts no goroutines.
type Server struct {
	cfg       Config
	log       *slog.Logger
	blockSize int64
	maxLength int64

	warm       *warmup      // the warm-up bound
	streams    *streams     // what each client read of each object (read-ahead)
	digests    *clientRates // unowned digests per client
	storeReads *clientRates // stats that go to the store, per client
}

// New returns the handler.
func New(cfg Config) (*Server, error) {
	if cfg.Cache == nil || cfg.Ownership == nil || cfg.Stats == nil || cfg.Logger == nil {
		return nil, errors.New("dataserver: Cache, Ownership, Stats and Logger are required")
	}
	if cfg.MaxRangeBlocks <= 0 {
		cfg.MaxRangeBlocks = DefaultMaxRangeBlocks
	}
	if cfg.UnownedDigestRate <= 0 {
		cfg.UnownedDigestRate = DefaultUnownedDigestRate
	}
	if cfg.ReadAhead == 0 {
		cfg.ReadAhead = DefaultReadAhead
	}
	if cfg.WarmupRate == 0 {
		cfg.WarmupRate = DefaultWarmupRate
	}
	if cfg.WarmupPeriod == 0 {
		cfg.WarmupPeriod = DefaultWarmupPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.StoreReadRate <= 0 {
		cfg.StoreReadRate = DefaultStoreReadRate
	}
	return &Server{
		warm:       newWarmup(&cfg),
		streams:    newStreams(),
		digests:    newClientRates(cfg.UnownedDigestRate),
		storeReads: newClientRates(cfg.StoreReadRate),
		cfg:        cfg,
		log:        cfg.Logger.With("component", "dataserver"),
		blockSize:  cfg.Cache.BlockSize(),
		maxLength:  int64(cfg.MaxRangeBlocks) * cfg.Cache.BlockSize(),
	}, nil
}

// apiError is an error answer.
type apiError struct {
	status int
	code   string
	msg    string
	// version is sent (header and body) with wrong_owner.
	version    uint64
	hasVersion bool
	// objectVersion is sent (header) with version_changed.
	objectVersion string
	// retryAfter sends Retry-After: 1 (a rate limit).
	retryAfter bool
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// request is a parsed, validated request.
type request struct {
	key      string
	offset   int64
	length   int64
	replicas int
	// version is the object version asked for ("": any); fresh asks
	// for a revalidation with the store first.
	version string
	fresh   bool
	// last: the client has no other owner to ask (warm-up waits, never
	// refuses).
	last bool
	// clientVersion is the client's placement version ("" if not sent):
	// diagnostics only, ownership decides.
	clientVersion string
	// client names the client (clientOf): its read-ahead stream.
	client string
}

// ServeHTTP serves one request; see the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.cfg.Stats.Request()
	outcome, operation := "ok", "get"
	if strings.HasPrefix(r.URL.Path, datav1.DigestPrefix) {
		operation = "digest"
	}
	defer func() {
		if s.cfg.Observe != nil {
			s.cfg.Observe(operation, outcome, time.Since(start))
		}
	}()
	n, err := s.serve(w, r)
	if ue, ok := err.(uncachedDigest); ok {
		outcome, err = "uncached", ue.error
	}
	s.cfg.Stats.Served(n)
	if err == nil {
		return
	}
	s.cfg.Stats.Error()
	var ae *apiError
	if !errors.As(err, &ae) {
		// The body had started: all we can do is cut the connection so
		// the client sees fewer bytes than Content-Length.
		outcome = datav1.CodeAborted
		if r.Context().Err() != nil {
			outcome = datav1.CodeCanceled
		} else {
			s.log.Warn("data response aborted", "object", r.URL.Path, "sent", n, "error", err)
		}
		panic(http.ErrAbortHandler)
	}
	outcome = ae.code
	if ae.code == datav1.CodeCanceled {
		return // nobody is listening
	}
	if ae.status >= 500 {
		s.log.Warn("data request failed", "path", r.URL.Path, "status", ae.status, "error", ae.msg)
	}
	writeError(w, ae)
}

func writeError(w http.ResponseWriter, ae *apiError) {
	var body datav1.ErrorBody
	body.Error.Code, body.Error.Message = ae.code, ae.msg
	if ae.hasVersion {
		v := placement.Version(ae.version).String()
		body.Error.PlacementVersion = v
		w.Header().Set(datav1.VersionHeader, v)
	}
	if ae.code == datav1.CodeVersionChanged {
		w.Header().Set(datav1.ObjectVersionHeader, ae.objectVersion)
	}
	if ae.retryAfter {
		w.Header().Set("Retry-After", "1")
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(ae.status)
	w.Write(append(b, '\n'))
}

// owns checks the ownership of every block req touches, before any I/O,
// and returns the placement version it was judged under, or the
// wrong-owner answer.
func (s *Server) owns(req *request) (uint64, *apiError) {
	first, last := req.offset/s.blockSize, (req.offset+req.length-1)/s.blockSize
	var version uint64
	for i := first; i <= last; i++ {
		owned, v := s.cfg.Ownership.Owns(req.key, i)
		if i == first {
			version = v
		}
		if !owned {
			return 0, &apiError{
				status: http.StatusMisdirectedRequest, code: datav1.CodeWrongOwner, version: v, hasVersion: true,
				msg: fmt.Sprintf("this worker does not own block %d of object %q (placement key %q) under placement version %s (the request used %s): refresh placement",
					i, req.key, datav1.BlockKey(req.key, i), placement.Version(v), cmp.Or(req.clientVersion, "none")),
			}
		}
	}
	return version, nil
}

// serve answers the request. It returns the body bytes written, and an
// *apiError when nothing was written yet, or another error when the body
// failed after it started.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) (int64, error) {
	key, ok := strings.CutPrefix(r.URL.Path, datav1.PathPrefix)
	digest := false
	if !ok {
		key, digest = strings.CutPrefix(r.URL.Path, datav1.DigestPrefix)
	}
	if !ok && !digest {
		return 0, errorf(http.StatusNotFound, datav1.CodeUnknownPath, "no resource at %q: objects are under %s, digests under %s", r.URL.Path, datav1.PathPrefix, datav1.DigestPrefix)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return 0, errorf(http.StatusMethodNotAllowed, datav1.CodeMethodNotAllowed, "method %s: use GET or HEAD", r.Method)
	}
	if s.cfg.Ready != nil && !s.cfg.Ready() {
		w.Header().Set("Retry-After", "1")
		return 0, errorf(http.StatusServiceUnavailable, datav1.CodeNotReady, "worker is not ready (starting or draining)")
	}
	req, aerr := s.parse(key, r)
	if aerr != nil {
		return 0, aerr
	}
	ctx := r.Context()
	if digest {
		return 0, s.serveDigest(ctx, w, r, req)
	}

	version, aerr := s.owns(req)
	if aerr != nil {
		return 0, aerr
	}
	w.Header().Set(datav1.VersionHeader, placement.Version(version).String())

	info, aerr := s.stat(ctx, r, req)
	if aerr != nil {
		return 0, aerr
	}
	size := info.Size
	if req.offset > size || (req.offset == size && size > 0) {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		return 0, errorf(http.StatusRequestedRangeNotSatisfiable, datav1.CodeRangeNotSatisfiable,
			"offset %d is not before the end of object %q (%d bytes)", req.offset, req.key, size)
	}
	end := min(req.offset+req.length, size)

	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(end-req.offset, 10))
	h.Set(datav1.ObjectSizeHeader, strconv.FormatInt(size, 10))
	h.Set(datav1.ObjectVersionHeader, info.Version)
	if r.Method == http.MethodHead || end == req.offset {
		w.WriteHeader(http.StatusOK)
		return 0, nil
	}

	return s.serveBody(ctx, w, req, info, end)
}

// serveBody sends bytes [req.offset, end) of the object at info's
// version, after the warm-up bound admits the loads it needs.
func (s *Server) serveBody(ctx context.Context, w http.ResponseWriter, req *request, info blob.Info, end int64) (int64, error) {
	// The read joins the client's stream as it arrives: a parallel
	// reader's next requests may come while this one waits for the store.
	stream := s.observe(req, end)
	if aerr := s.admit(ctx, req, info, end); aerr != nil {
		return 0, aerr
	}
	// Open every block first: a failure is still an error status. A
	// block that misses is open once its load has its first bytes.
	blocks, aerr := s.openBlocks(ctx, req.key, info, req.offset, end, nil)
	defer closeBlocks(blocks)
	if aerr != nil {
		return 0, aerr
	}
	s.readAhead(req.key, info, stream)
	w.WriteHeader(http.StatusOK)
	// Send the header now: net/http's ReadFrom otherwise copies the
	// body's first 512 bytes through user space (for content sniffing,
	// which the Content-Type set above makes moot) before it hands the
	// rest to the connection's sendfile.
	if err := http.NewResponseController(w).Flush(); err != nil {
		return 0, err
	}
	return s.writeRange(w, blocks, req.offset, end)
}

// openBlocks opens the blocks holding bytes [off, end) of the object at
// info's version, through the cache, or, for a block owned reports false
// for, with Cache.Peek (nothing cached). The caller closes them (also on
// error).
func (s *Server) openBlocks(ctx context.Context, key string, info blob.Info, off, end int64, owned func(int64) bool) ([]*cache.Block, *apiError) {
	first, lastBlock := off/s.blockSize, (end-1)/s.blockSize
	blocks := make([]*cache.Block, 0, lastBlock-first+1)
	for i := first; i <= lastBlock; i++ {
		var b *cache.Block
		var err error
		if owned == nil || owned(i) {
			b, err = s.cfg.Cache.OpenBlock(ctx, key, info, i)
		} else {
			b, err = s.cfg.Cache.Peek(ctx, key, info, i)
		}
		if err != nil {
			return blocks, s.mapErr(ctx, key, err)
		}
		blocks = append(blocks, b)
		if b.ObjectSize() != info.Size || b.Version() != info.Version {
			return blocks, &apiError{status: http.StatusPreconditionFailed, code: datav1.CodeVersionChanged, objectVersion: b.Version(),
				msg: fmt.Sprintf("object %q changed during the request (version %q, %d bytes, then %q, %d bytes): read it again", key, info.Version, info.Size, b.Version(), b.ObjectSize())}
		}
	}
	return blocks, nil
}

func closeBlocks(blocks []*cache.Block) {
	for _, b := range blocks {
		b.Close()
	}
}

// writeRange writes bytes [off, end) from blocks, which start at the
// block holding off.
func (s *Server) writeRange(w io.Writer, blocks []*cache.Block, off, end int64) (int64, error) {
	first := off / s.blockSize
	var sent int64
	for j, b := range blocks {
		blockStart := (first + int64(j)) * s.blockSize
		from := max(off, blockStart) - blockStart
		to := min(end, blockStart+b.Size()) - blockStart
		n, err := b.WriteRange(w, from, to-from)
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// uncachedDigest marks a digest answered with blocks read from the store
// for a block this worker does not own (the "uncached" outcome).
type uncachedDigest struct{ error }

// serveDigest answers the SHA-256 of the range: the second source a
// client checks another worker's bytes against. Blocks this worker owns
// are read through its cache as a read would; others are read from the
// store without caching them (Cache.Peek), at most UnownedDigestRate per
// second for each client, so no client can fill a cache it does not own.
func (s *Server) serveDigest(ctx context.Context, w http.ResponseWriter, r *http.Request, req *request) error {
	info, aerr := s.stat(ctx, r, req)
	if aerr != nil {
		return aerr
	}
	size := info.Size
	if req.offset > size || (req.offset == size && size > 0) {
		return errorf(http.StatusRequestedRangeNotSatisfiable, datav1.CodeRangeNotSatisfiable,
			"offset %d is not before the end of object %q (%d bytes)", req.offset, req.key, size)
	}
	end := min(req.offset+req.length, size)
	h := sha256.New()
	var ret error
	if end > req.offset {
		first, last := req.offset/s.blockSize, (end-1)/s.blockSize
		unowned := map[int64]bool{}
		for i := first; i <= last; i++ {
			if owned, _ := s.cfg.Ownership.Owns(req.key, i); !owned {
				unowned[i] = true
			}
		}
		if len(unowned) > 0 {
			if !s.digests.allow(clientOf(r), len(unowned)) {
				w.Header().Set("Retry-After", "1")
				return errorf(http.StatusTooManyRequests, datav1.CodeRateLimited,
					"digests of blocks this worker does not own are limited to %g per second for each client: ask an owner", s.cfg.UnownedDigestRate)
			}
			ret = uncachedDigest{}
		}
		// A client vouching for blocks it reads elsewhere reads in order
		// too: the digest is part of its stream (no read-ahead of its own).
		s.observe(req, end)
		// A digest loads cold blocks from the store as a read does
		// (owned ones into the cache, others with Peek): the warm-up
		// bound is the same.
		if aerr := s.admit(ctx, req, info, end); aerr != nil {
			return aerr
		}
		blocks, aerr := s.openBlocks(ctx, req.key, info, req.offset, end, func(i int64) bool { return !unowned[i] })
		defer closeBlocks(blocks)
		if aerr != nil {
			return aerr
		}
		if _, err := s.writeRange(h, blocks, req.offset, end); err != nil {
			return s.mapErr(ctx, req.key, err)
		}
	}
	b, _ := json.Marshal(datav1.Digest{Object: req.key, Offset: req.offset, Length: end - req.offset, ObjectSize: size, SHA256: hex.EncodeToString(h.Sum(nil)), Version: info.Version})
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return ret
}

// parse validates the key and the parameters.
func (s *Server) parse(key string, r *http.Request) (*request, *apiError) {
	if err := blob.ValidateKey(key); err != nil {
		return nil, errorf(http.StatusBadRequest, datav1.CodeInvalidKey, "%v", err)
	}
	if r.Header.Get("Range") != "" {
		return nil, errorf(http.StatusBadRequest, datav1.CodeInvalidParameter, "header Range is not supported: give the range with the offset and length parameters")
	}
	q := r.URL.Query()
	req := &request{key: key, replicas: 1, client: clientOf(r)}
	var aerr *apiError
	param := func(name string, min, max int64) (v int64, set bool) {
		vals, ok := q[name]
		if !ok || aerr != nil {
			return 0, false
		}
		if len(vals) != 1 {
			aerr = errorf(http.StatusBadRequest, datav1.CodeInvalidParameter, "parameter %s is given %d times: give it once", name, len(vals))
			return 0, false
		}
		v, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil || v < min || v > max {
			aerr = errorf(http.StatusBadRequest, datav1.CodeInvalidParameter, "parameter %s=%q: must be a decimal integer from %d to %d", name, vals[0], min, max)
			return 0, false
		}
		return v, true
	}
	req.offset, _ = param("offset", 0, 1<<62)
	fresh, _ := param("fresh", 0, 1)
	req.fresh = fresh == 1
	last, _ := param("last", 0, 1)
	req.last = last == 1
	if vals, ok := q["version"]; ok && aerr == nil {
		switch {
		case len(vals) != 1:
			aerr = errorf(http.StatusBadRequest, datav1.CodeInvalidParameter, "parameter version is given %d times: give it once", len(vals))
		case len(vals[0]) == 0 || len(vals[0]) > datav1.MaxVersionBytes:
			aerr = errorf(http.StatusBadRequest, datav1.CodeInvalidParameter, "parameter version is %d bytes: must be 1 to %d", len(vals[0]), datav1.MaxVersionBytes)
		}
		if aerr == nil {
			req.version = vals[0]
		}
	}
	length, haveLength := param("length", 1, s.maxLength)
	replicas, haveReplicas := param("replicas", 1, datav1.MaxReplicas)
	if aerr != nil {
		return nil, aerr
	}
	if haveReplicas {
		req.replicas = int(replicas)
	}
	req.length = length
	if !haveLength {
		req.length = s.blockSize - req.offset%s.blockSize
	}
	if hv := r.Header.Get(datav1.VersionHeader); hv != "" {
		if _, err := placement.ParseVersion(hv); err != nil {
			return nil, errorf(http.StatusBadRequest, datav1.CodeInvalidParameter, "header %s: %v", datav1.VersionHeader, err)
		}
		req.clientVersion = hv
	}
	return req, nil
}

// mapErr turns a cache error into an answer.
func (s *Server) mapErr(ctx context.Context, key string, err error) *apiError {
	switch {
	case ctx.Err() != nil:
		return errorf(499, datav1.CodeCanceled, "client left: %v", err)
	case errors.Is(err, blob.ErrVersionChanged):
		return &apiError{status: http.StatusPreconditionFailed, code: datav1.CodeVersionChanged,
			msg: fmt.Sprintf("object %q changed in the store during the request: read it again", key)}
	case errors.Is(err, blob.ErrNotFound):
		return errorf(http.StatusNotFound, datav1.CodeNotFound, "object %q not found", key)
	case errors.Is(err, blob.ErrInvalidKey):
		return errorf(http.StatusBadRequest, datav1.CodeInvalidKey, "%v", err)
	case errors.Is(err, cache.ErrOutOfRange):
		s.log.Warn("object changed size during a request", "object", key, "error", err)
		return errorf(http.StatusBadGateway, datav1.CodeBackend, "object %q changed size during the request", key)
	case errors.Is(err, blob.ErrBackend):
		// The blob store's text can name files, hosts and OS errors: it
		// goes to the log, never to the client.
		s.log.Warn("blob store failed", "object", key, "error", err)
		return errorf(http.StatusBadGateway, datav1.CodeBackend, "the blob store failed to serve object %q; see this worker's log", key)
	case errors.Is(err, cache.ErrClosed):
		return errorf(http.StatusServiceUnavailable, datav1.CodeUnavailable, "block cache is closed")
	}
	// The cache's own disk failed: the detail (paths) goes to the log only.
	s.log.Error("block cache failed", "object", key, "error", err)
	return errorf(http.StatusInternalServerError, datav1.CodeInternal, "block cache i/o error on this worker")
}
