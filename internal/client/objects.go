package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/placement"
)

// ObjectReader reads whole objects through the workers' caches: for each
// block it looks up the owners, reads from the first that answers, and
// moves to the next owner on any failure of one (a connection failure, a
// worker error, a wrong-owner, not-found or range answer, a version
// change, failed verification); when every owner failed it looks the
// block up again after a jittered backoff, and with a Source it finally
// reads the block from the store itself. A worker's version never
// replaces the coordinators' in the client.
//
// A read never mixes versions of the object: the first answer's object
// version (or, with a Source, the store's own) is asked of every later
// request, and a worker that no longer has it answers version_changed;
// the read then fails with ErrObjectChanged (its caller may start over).
type ObjectReader struct {
	Client *Client
	HTTP   *http.Client
	// BlockSize must equal the workers' block size: placement keys are
	// per block.
	BlockSize int64
	// Replicas is the number of owners looked up per block (fallbacks).
	Replicas int
	// OnFallback, if set, is told each time a read moves to another owner.
	OnFallback func(object string, block int64, owner string, err error)
	// TLS reads over https: HTTP's transport must carry the mutual TLS
	// configuration (pki.Source.ClientConfig expecting workers), and each
	// answer must come from the certificate of the owner asked.
	TLS bool
	// Verify checks every block before it is written, against digests of
	// independent sources the client chooses: the Replicas+2 workers the
	// coordinators' placement names for the block (the serving owner's
	// bytes count as its vote). A block is accepted only when no worker
	// that answered disagrees and a strict majority of the workers asked,
	// at least two, vouch for it. When workers disagree the block is read
	// from Source when there is one (and the workers whose bytes or
	// digests differ from the store's are reported), otherwise the read
	// fails with ErrVerification, naming no worker as the liar: without
	// the store nobody can tell which side is right.
	Verify bool
	// Source, if set, is the blob store itself (the client has
	// credentials for it). The object's size, version and checksum come
	// from it; the assembled object is checked against the store's
	// checksum when it keeps one (ErrChecksum otherwise); and a block that
	// no owner could serve, or that workers disagree about, is read from
	// it directly.
	Source blob.Store
	// OnVerifyFailure, if set, is told of each block workers disagreed
	// about (or that could not be verified), with a message that names
	// which workers said what, and which the store contradicts when
	// Source settled it.
	OnVerifyFailure func(object string, block int64, msg string)
	// VerifyFailures, if set, counts such blocks.
	VerifyFailures prometheus.Counter
	// SourceVouchers is, with a Source that keeps no checksum of the
	// object (file://, most http(s)://), how many workers must vouch for
	// a block (Verify) for it to be accepted without reading it from the
	// store too; 0, the default, checks every block against the store.
	// Workers that all collude vouch for each other, so only the store
	// can tell; with a checksum the assembled object is checked instead.
	SourceVouchers int

	// bufs keeps the *bytes.Buffer a ReadObject reads each answer into
	// for the next one (reads can run concurrently): a run's buffer is
	// maxRunBlocks blocks, and a fresh one per object costs the zeroing
	// and page faults of that much memory.
	bufs sync.Pool
}

// Errors of ObjectReader.
var (
	// ErrVerification: a block's bytes could not be verified: workers
	// disagree about them and there is no Source to settle it, or too few
	// workers vouched for them.
	ErrVerification = errors.New("block verification failed")
	// ErrChecksum: the object assembled does not match the store's own
	// checksum of it.
	ErrChecksum = errors.New("object checksum mismatch")
	// ErrObjectChanged: the object changed in the store during the read.
	// Read it again.
	ErrObjectChanged = errors.New("object changed during the read")
)

// maxRefresh bounds placement lookups for one block.
const maxRefresh = 3

// maxRunBlocks bounds the consecutive blocks ReadObject asks for in one
// request when they have the same owners (workers take ranges of up to
// dataserver.DefaultMaxRangeBlocks blocks). A run is buffered whole
// before it is written, so this also bounds the reader's memory:
// maxRunBlocks blocks.
const maxRunBlocks = 4

// refreshBackoff spaces the placement lookups of one block.
var refreshBackoff = backoff.Policy{Initial: 50 * time.Millisecond, Max: time.Second, Jitter: 0.5}

// digestBackoff spaces retries of a digest a worker refused with
// rate_limited.
var digestBackoff = backoff.Policy{Initial: 200 * time.Millisecond, Max: 1500 * time.Millisecond, Jitter: 0.3}

// maxDigestTries bounds the tries of one digest refused with rate_limited.
const maxDigestTries = 6

// ReadResult describes a finished read.
type ReadResult struct {
	// N is the number of bytes written: the object's size.
	N int64
	// Version is the object version read.
	Version string
	// Checksum is the store's checksum the object was checked against;
	// the zero value when there was none (no Source, or a store without
	// checksums).
	Checksum blob.Checksum
	// Blocks is the number of blocks; FromSource how many of them were
	// read from Source; Verified how many were verified by workers;
	// CheckedAgainstSource how many workers served that were compared
	// with the store's bytes (a store without checksums,
	// ObjectReader.SourceVouchers).
	Blocks, FromSource, Verified, CheckedAgainstSource int64
}

// Describe says in words what was verified, for a reader's user.
func (res *ReadResult) Describe(verify, haveSource bool) string {
	var parts []string
	switch {
	case !res.Checksum.IsZero():
		parts = append(parts, fmt.Sprintf("the object matches the store's %s checksum", res.Checksum.Algorithm))
	case haveSource:
		parts = append(parts, "the store keeps no checksum of the object")
	default:
		parts = append(parts, "no store checksum checked (give the store's URL to check the object against it)")
	}
	if verify {
		parts = append(parts, fmt.Sprintf("%d of %d blocks vouched for by a majority of workers", res.Verified, res.Blocks))
	}
	if res.CheckedAgainstSource > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d blocks compared with the store's bytes", res.CheckedAgainstSource, res.Blocks))
	}
	if res.FromSource > 0 {
		parts = append(parts, fmt.Sprintf("%d blocks read from the store", res.FromSource))
	}
	return strings.Join(parts, "; ")
}

// readState is one ReadObject's view of the object.
type readState struct {
	object  string
	size    int64  // -1 until known
	version string // "" until known (or the store has none)
	known   bool   // version and size are known (first answer or Source)
	// storeCheck: Source keeps no checksum of the object, so blocks are
	// compared with its bytes (ObjectReader.SourceVouchers).
	storeCheck bool
	res        ReadResult
}

// ReadObject writes the object to w and returns its size (see Read).
func (r *ObjectReader) ReadObject(ctx context.Context, object string, w io.Writer) (int64, error) {
	res, err := r.Read(ctx, object, w)
	return res.N, err
}

// Read writes the object to w. It verifies every block's length; the
// total length is checked against the object's size, and the object
// against the store's checksum when Source gives one. On error w may
// hold a prefix of the object, or (ErrChecksum) all of it: only a nil
// error means the bytes are right.
//
// Once the first block has told the object's size, consecutive blocks
// whose placement names the same owners, in the same order, under the
// same version, are read in one request (up to maxRunBlocks; not when
// Verify is set, which checks block by block): one round trip and one
// response instead of several from the same worker, and the fallback
// order is the same for every block of the run.
func (r *ObjectReader) Read(ctx context.Context, object string, w io.Writer) (*ReadResult, error) {
	if r.BlockSize <= 0 {
		return &ReadResult{}, errors.New("client: block size must be positive")
	}
	st := &readState{object: object, size: -1}
	var sum hash.Hash
	var want blob.Checksum
	if r.Source != nil {
		info, err := blob.Stat(ctx, r.Source, object)
		if err != nil {
			return &st.res, fmt.Errorf("object %s in the store: %w", object, err)
		}
		st.size, st.version, st.known = info.Size, info.Version, true
		if sum = info.Checksum.NewHash(); sum != nil {
			want = info.Checksum
			w = io.MultiWriter(w, sum)
		} else {
			st.storeCheck = true // nothing to check the whole object against
		}
	}
	buf, _ := r.bufs.Get().(*bytes.Buffer) // every request's body, in turn
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() { buf.Reset(); r.bufs.Put(buf) }()
	var written int64
	for block, n := int64(0), int64(0); st.size < 0 || block*r.BlockSize < st.size; block += n {
		var res *datav1.Result
		var err error
		res, n, err = r.readBlocks(ctx, st, block, buf, w)
		if err != nil {
			st.res.N = written
			return &st.res, err
		}
		if st.size < 0 {
			st.size = res.ObjectSize
		} else if res.ObjectSize != st.size {
			st.res.N = written
			return &st.res, fmt.Errorf("%w: object %s changed size during the read (%d, then %d bytes)", ErrObjectChanged, object, st.size, res.ObjectSize)
		}
		st.res.Blocks += n
		written += res.N
		if st.size == 0 {
			break
		}
	}
	st.res.N, st.res.Version = written, st.version
	if written != st.size {
		return &st.res, fmt.Errorf("object %s: read %d bytes, want %d", object, written, st.size)
	}
	if sum != nil {
		if got := sum.Sum(nil); !bytes.Equal(got, want.Value) {
			return &st.res, fmt.Errorf("%w: object %s (version %s): the %d bytes assembled have %s %x, the store's checksum is %x: discard them",
				ErrChecksum, object, st.version, written, want.Algorithm, got, want.Value)
		}
		st.res.Checksum = want
	}
	return &st.res, nil
}

// ReadFromSource writes the object to w reading every block from Source
// only, checked against the store's checksum as Read does: the way out
// when workers' bytes failed that check.
func (r *ObjectReader) ReadFromSource(ctx context.Context, object string, w io.Writer) (*ReadResult, error) {
	if r.Source == nil {
		return &ReadResult{}, errors.New("client: no source store")
	}
	src := &ObjectReader{BlockSize: r.BlockSize, Source: r.Source}
	return src.Read(ctx, object, w)
}

// attempt is what the owners of one block answered in one round.
type attempt struct {
	tried      []string // "node: error" per source
	notFound   int      // owners that answered not found or out of range
	answered   int      // owners that answered at all
	changed    bool     // an owner answered version_changed
	disagreed  bool     // workers disagreed about the bytes
	verifyErrs []error
}

// readBlocks reads block, and the blocks after it that share its owners
// (see Read), into buf, then writes them to w. It returns the answer and
// the number of blocks read.
func (r *ObjectReader) readBlocks(ctx context.Context, st *readState, block int64, buf *bytes.Buffer, w io.Writer) (*datav1.Result, int64, error) {
	object := st.object
	if r.Client == nil { // ReadFromSource
		return r.fromSource(ctx, st, block, buf, w, nil)
	}
	key := datav1.BlockKey(object, block)
	replicas := max(r.Replicas, 1)
	var all attempt
	retry := backoff.New(refreshBackoff)
	for round := 0; round < maxRefresh; round++ {
		if round > 0 {
			// Membership is moving (or every owner failed): give the
			// coordinators a moment to see it, jittered so a fleet of
			// readers does not refresh in step.
			if err := backoff.Sleep(ctx, retry.Next()); err != nil {
				return nil, 0, err
			}
		}
		lookup := replicas
		if r.Verify {
			lookup = min(replicas+2, datav1.MaxReplicas)
		}
		p, err := r.Client.Lookup(ctx, key, lookup)
		if err != nil {
			all.tried = append(all.tried, fmt.Sprintf("placement: %v", err))
			if r.Source != nil && st.known {
				return r.fromSource(ctx, st, block, buf, w, &all)
			}
			return nil, 0, fmt.Errorf("placement of %s block %d: %w", object, block, err)
		}
		// After a failed round, one block at a time.
		n := int64(1)
		if round == 0 && !r.Verify {
			n = r.run(ctx, object, block, st.size, lookup, p)
		}
		var a attempt
		var digests digestCache
		for i, owner := range p.Owners {
			if i >= replicas {
				break // the extra owners only verify
			}
			// Buffer the blocks so a failure midway never leaves a
			// partial block in w before a fallback rewrites it.
			req := datav1.Request{
				Addr: owner.Address, Object: object, Offset: block * r.BlockSize, Length: n * r.BlockSize,
				Replicas: replicas, Version: uint64(p.Version), TLS: r.TLS, Node: owner.NodeID,
				ObjectVersion: st.version, Fresh: !st.known,
			}
			buf.Reset()
			res, err := datav1.FetchTo(ctx, r.HTTP, req, buf)
			if err == nil {
				res.Data = buf.Bytes()
				if !st.known {
					// The first answer fixes the version every later
					// request of this read asks for.
					st.version, st.size, st.known = res.ObjectVersion, res.ObjectSize, true
					req.ObjectVersion = st.version
				}
				vouchers := 1
				if r.Verify {
					vouchers, err = r.verify(ctx, &digests, req, p.Owners, owner, res, block)
				}
				if err == nil {
					return r.accept(ctx, st, served{block: block, n: n, res: res, vouchers: vouchers, node: owner.NodeID}, w)
				}
			}
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			a.tried = append(a.tried, fmt.Sprintf("%s: %v", owner.NodeID, err))
			var de *datav1.Error
			var dis *disagreement
			switch {
			case errors.As(err, &dis):
				a.disagreed = true
				a.answered++
				a.verifyErrs = append(a.verifyErrs, err)
			case errors.Is(err, ErrVerification):
				a.answered++
				a.verifyErrs = append(a.verifyErrs, err)
			case errors.Is(err, datav1.ErrVersionChanged):
				a.changed = true
				a.answered++
			case errors.As(err, &de):
				a.answered++
				switch {
				case errors.Is(err, datav1.ErrWrongOwner):
					// The worker's placement disagrees with the answer:
					// one of the two is behind, and the worker's version
					// says nothing about which. Skip it, try the next
					// replica, and look the keys up again afterwards.
					r.invalidate(object, block, n)
				case errors.Is(err, datav1.ErrNotFound), errors.Is(err, datav1.ErrRangeNotSatisfiable):
					// One owner's word: another owner, or the store,
					// may know better.
					a.notFound++
				}
			default:
				r.invalidate(object, block, n) // connection failure: the owner may be gone
			}
			if r.OnFallback != nil {
				r.OnFallback(object, block, owner.NodeID, err)
			}
		}
		all.tried = append(all.tried, a.tried...)
		all.verifyErrs = append(all.verifyErrs, a.verifyErrs...)
		if len(a.verifyErrs) > 0 {
			if r.VerifyFailures != nil {
				r.VerifyFailures.Inc()
			}
			if r.OnVerifyFailure != nil && (r.Source == nil || !a.disagreed) {
				r.OnVerifyFailure(object, block, a.verifyErrs[0].Error())
			}
		}
		switch {
		case a.disagreed && r.Source != nil:
			return r.fromSource(ctx, st, block, buf, w, &all)
		case a.disagreed:
			return nil, 0, fmt.Errorf("read %s block %d: %w; without the store (talon get --source) it cannot be told which side is right", object, block, a.verifyErrs[0])
		case a.changed:
			if r.Source != nil {
				// The store is the authority on versions: ask it.
				return r.fromSource(ctx, st, block, buf, w, &all)
			}
			return nil, 0, fmt.Errorf("%w: %s block %d: a worker reports that the store holds another version than %q, which this read started with: read it again (tried %s)",
				ErrObjectChanged, object, block, st.version, strings.Join(a.tried, "; "))
		case a.notFound > 0 && a.notFound == a.answered && a.answered == min(replicas, len(p.Owners)):
			// Every owner says the object (or the range) is not there.
			if r.Source != nil && st.known {
				return r.fromSource(ctx, st, block, buf, w, &all)
			}
			return nil, 0, fmt.Errorf("read %s block %d: every owner answered that it is not there (%s): %w", object, block, strings.Join(a.tried, "; "), datav1.ErrNotFound)
		}
		// Every owner failed or disowned the block: look it up again, in
		// case membership changed, then give up.
		r.invalidate(object, block, n)
	}
	if r.Source != nil && st.known {
		return r.fromSource(ctx, st, block, buf, w, &all)
	}
	var last error = errors.New("no owner")
	if len(all.verifyErrs) > 0 {
		last = errors.Join(all.verifyErrs...)
	}
	return nil, 0, fmt.Errorf("read %s block %d: nothing could serve it; tried %s: %w", object, block, strings.Join(all.tried, "; "), last)
}

// served is a run of blocks a worker served that passed the checks
// asked for.
type served struct {
	block, n int64
	res      *datav1.Result
	vouchers int    // workers that vouched for the bytes, the server included
	node     string // the worker that served them
}

// accept writes a run that passed the workers' checks to w. With a Source
// that keeps no checksum (readState.storeCheck) and fewer than
// SourceVouchers workers vouching, it first reads the same bytes from the
// store: when they differ the store's are written and the worker named
// (colluding workers vouch for each other; only the store can tell).
func (r *ObjectReader) accept(ctx context.Context, st *readState, s served, w io.Writer) (*datav1.Result, int64, error) {
	data := s.res.Data
	if st.storeCheck && (r.SourceVouchers <= 0 || s.vouchers < r.SourceVouchers) {
		truth, err := r.storeRange(ctx, st, s.block*r.BlockSize, int64(len(data)))
		if err != nil {
			return nil, 0, fmt.Errorf("read %s block %d: check against the store: %w", st.object, s.block, err)
		}
		st.res.CheckedAgainstSource += s.n
		if !bytes.Equal(truth, data) {
			if r.VerifyFailures != nil {
				r.VerifyFailures.Inc()
			}
			if r.OnVerifyFailure != nil {
				r.OnVerifyFailure(st.object, s.block, fmt.Sprintf("the store's bytes contradict workers %s (the %d bytes from block %d it served, vouched for by %d workers, differ from the store's); read them from the store", s.node, len(data), s.block, s.vouchers))
			}
			s.res.Data, data = truth, truth
			st.res.FromSource += s.n
		}
	}
	if _, err := w.Write(data); err != nil {
		return nil, 0, err
	}
	if r.Verify {
		st.res.Verified += s.n
	}
	return s.res, s.n, nil
}

// storeRange reads n bytes at off of the object at the read's version
// from Source.
func (r *ObjectReader) storeRange(ctx context.Context, st *readState, off, n int64) ([]byte, error) {
	rc, err := blob.ReadVersion(ctx, r.Source, st.object, st.version, off, n)
	if err != nil {
		if errors.Is(err, blob.ErrVersionChanged) {
			err = fmt.Errorf("%w: %w", ErrObjectChanged, err)
		}
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, n+1))
	if err == nil && int64(len(b)) != n {
		err = fmt.Errorf("the store sent %d of %d bytes", len(b), n)
	}
	return b, err
}

// fromSource reads block of the object at the read's version from Source
// into buf and writes it. When workers disagreed about the block
// (a.verifyErrs holds their disagreements) it reports which of them the
// store's bytes contradict.
func (r *ObjectReader) fromSource(ctx context.Context, st *readState, block int64, buf *bytes.Buffer, w io.Writer, a *attempt) (*datav1.Result, int64, error) {
	if st.size < 0 && r.Source != nil {
		info, err := blob.Stat(ctx, r.Source, st.object)
		if err != nil {
			return nil, 0, fmt.Errorf("object %s in the store: %w", st.object, err)
		}
		st.size, st.version, st.known = info.Size, info.Version, true
	}
	off := block * r.BlockSize
	n := min(r.BlockSize, st.size-off)
	buf.Reset()
	rc, err := blob.ReadVersion(ctx, r.Source, st.object, st.version, off, n)
	if err == nil {
		_, err = io.Copy(buf, rc)
		rc.Close()
	}
	if err == nil && int64(buf.Len()) != n {
		err = fmt.Errorf("the store sent %d of the block's %d bytes", buf.Len(), n)
	}
	if err != nil {
		tried := "nothing else"
		if a != nil && len(a.tried) > 0 {
			tried = strings.Join(a.tried, "; ")
		}
		if errors.Is(err, blob.ErrVersionChanged) {
			err = fmt.Errorf("%w: %w", ErrObjectChanged, err)
		}
		return nil, 0, fmt.Errorf("read %s block %d: tried %s; then the store: %w", st.object, block, tried, err)
	}
	if a != nil {
		sum := sha256.Sum256(buf.Bytes())
		truth := hex.EncodeToString(sum[:])
		for _, e := range a.verifyErrs {
			var dis *disagreement
			if errors.As(e, &dis) {
				wrong := dis.contradicted(truth)
				if r.OnVerifyFailure != nil && len(wrong) > 0 {
					r.OnVerifyFailure(st.object, block, fmt.Sprintf("%v; the store's bytes contradict workers %s (their bytes or digests differ from the store's); read the block from the store", dis, strings.Join(wrong, ", ")))
				}
				break
			}
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return nil, 0, err
	}
	st.res.FromSource++
	return &datav1.Result{Data: buf.Bytes(), N: n, ObjectSize: st.size, ObjectVersion: st.version}, 1, nil
}

// run returns how many blocks from block on (at least 1, at most
// maxRunBlocks, none past the end of an object of size bytes; just 1 when
// size is not known yet) have the owners p names for block, in the same
// order, under the same version. The lookups are the ones the later
// blocks would need anyway, and with a cache (Options.CacheTTL) the one
// that ends the run is asked again from the cache.
func (r *ObjectReader) run(ctx context.Context, object string, block, size int64, lookup int, p Placement) int64 {
	n := int64(1)
	for size >= 0 && n < maxRunBlocks && (block+n)*r.BlockSize < size {
		q, err := r.Client.Lookup(ctx, datav1.BlockKey(object, block+n), lookup)
		if err != nil || q.Version != p.Version || !slices.Equal(q.Owners, p.Owners) {
			break
		}
		n++
	}
	return n
}

// invalidate drops the cached placement of blocks [block, block+n).
func (r *ObjectReader) invalidate(object string, block, n int64) {
	for i := range n {
		r.Client.Invalidate(datav1.BlockKey(object, block+i))
	}
}

// digestCache holds the digests of one block by worker, so each owner's
// bytes are checked against the same sources and each is asked once.
type digestCache struct {
	byNode map[string]*datav1.Digest
	failed map[string]error
}

// disagreement is a verification failure where workers that answered
// disagree about a block: digest (hex SHA-256) -> the workers that sent
// bytes of it or vouched for it.
type disagreement struct {
	object string
	block  int64
	sides  map[string][]string
	asked  int
}

func (d *disagreement) Error() string {
	keys := make([]string, 0, len(d.sides))
	for k := range d.sides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		nodes := slices.Sorted(slices.Values(d.sides[k]))
		parts = append(parts, fmt.Sprintf("%s: sha256 %s", strings.Join(nodes, ", "), k[:12]))
	}
	return fmt.Sprintf("%s block %d: workers disagree (%s; %d asked)", d.object, d.block, strings.Join(parts, "; "), d.asked)
}

func (d *disagreement) Unwrap() error { return ErrVerification }

// contradicted returns the workers on every side but truth's.
func (d *disagreement) contradicted(truth string) []string {
	var out []string
	for k, nodes := range d.sides {
		if k != truth {
			out = append(out, nodes...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// verify accepts res from owner when no other worker that answered
// disagrees and a strict majority of the workers asked (the owners
// placement names, owner included), at least two, agree on its SHA-256.
// The sources are chosen by placement, not by the owner, and a worker's
// vote is only ever its own bytes or its own digest, so a set of colluding
// workers cannot outvote an honest worker that answers: it can at most
// make the workers disagree, which the caller settles with the store or
// reports without blaming anyone.
func (r *ObjectReader) verify(ctx context.Context, dc *digestCache, req datav1.Request, owners []placement.Owner, owner placement.Owner, res *datav1.Result, block int64) (vouchers int, err error) {
	if dc.byNode == nil {
		dc.byNode, dc.failed = map[string]*datav1.Digest{}, map[string]error{}
	}
	sum := sha256.Sum256(res.Data)
	mine := hex.EncodeToString(sum[:])
	sides := map[string][]string{mine: {owner.NodeID}}
	var errs []error
	for _, v := range owners {
		if v.NodeID == owner.NodeID {
			continue
		}
		d, ok := dc.byNode[v.NodeID]
		if !ok {
			if err, failed := dc.failed[v.NodeID]; failed {
				errs = append(errs, err)
				continue
			}
			vreq := req
			vreq.Addr, vreq.Node = v.Address, v.NodeID
			var err error
			if d, err = r.digest(ctx, vreq); err != nil {
				dc.failed[v.NodeID] = err
				errs = append(errs, err)
				continue
			}
			dc.byNode[v.NodeID] = d
		}
		theirs := d.SHA256
		if d.ObjectSize != res.ObjectSize || d.Length != int64(len(res.Data)) {
			theirs = fmt.Sprintf("%s (size %d, length %d)", d.SHA256, d.ObjectSize, d.Length)
		}
		sides[theirs] = append(sides[theirs], v.NodeID)
	}
	agree := len(sides[mine])
	if len(sides) == 1 && agree >= 2 && 2*agree > len(owners) {
		return agree, nil
	}
	if len(sides) > 1 {
		err = &disagreement{object: req.Object, block: block, sides: sides, asked: len(owners)}
	} else {
		why := fmt.Sprintf("only %d of the %d workers placement names vouched for the bytes from %s; a strict majority, at least 2, is needed", agree, len(owners), owner.NodeID)
		if len(owners) < 2 {
			why = "placement names no second worker to take a digest from (a cluster of one worker; read with verification off, or give the store with --source)"
		}
		if len(errs) > 0 {
			why += ": " + errors.Join(errs...).Error()
		}
		err = fmt.Errorf("%w: cannot verify %s block %d: %s", ErrVerification, req.Object, block, why)
	}
	return agree, err
}

// digest asks one worker for a digest, waiting and asking again (a few
// times) when it answers rate_limited.
func (r *ObjectReader) digest(ctx context.Context, req datav1.Request) (*datav1.Digest, error) {
	b := backoff.New(digestBackoff)
	for try := 1; ; try++ {
		d, err := datav1.FetchDigest(ctx, r.HTTP, req)
		if err == nil || !errors.Is(err, datav1.ErrRateLimited) || try == maxDigestTries {
			return d, err
		}
		if err := backoff.Sleep(ctx, b.Next()); err != nil {
			return nil, err
		}
	}
}
