package client

import (
	"bytes"
	"context"
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
	// Parallel is how many blocks are read at once, from their owners,
	// once the first has told the object's size: they are written in
	// order, each as soon as the ones before it are, and at most Parallel
	// are buffered. 0 or 1 reads one run of blocks at a time.
	Parallel int
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
	// ErrUnversioned: the store names no version of the object (no ETag
	// or Last-Modified), so the blocks of one unverified read could come
	// from two contents of it (issue 47): read it with Verify.
	ErrUnversioned = errors.New("object has no version to read it by")
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
	// checksums). Only a cryptographic one (Checksum.Cryptographic) is
	// evidence against tampering; with a CRC every block a worker served
	// was also compared with the store's bytes.
	Checksum blob.Checksum
	// Silent names the owners that gave no digest of some block (refused,
	// timed out, reset, an error answer), sorted: their blocks were not
	// accepted from workers but read from the store.
	Silent []string
	// Blocks is the number of blocks; FromSource how many of them were
	// read from Source; Verified how many were verified by workers;
	// CheckedAgainstSource how many workers served that were compared
	// with the store's bytes (a store without checksums,
	// ObjectReader.SourceVouchers).
	Blocks, FromSource, Verified, CheckedAgainstSource int64
}

// Describe says in words what was verified, and which evidence vouches
// for the bytes, for a reader's user.
func (res *ReadResult) Describe(verify, haveSource bool) string {
	var parts []string
	crypto := res.Checksum.Cryptographic()
	switch {
	case crypto:
		parts = append(parts, fmt.Sprintf("the object matches the store's %s checksum (evidence: a cryptographic checksum)", res.Checksum.Algorithm))
	case !res.Checksum.IsZero():
		parts = append(parts, fmt.Sprintf("the object matches the store's %s checksum (which detects corruption, not tampering: evidence is the store's bytes)", res.Checksum.Algorithm))
	case haveSource:
		parts = append(parts, "the store keeps no checksum of the object (evidence is the store's bytes)")
	case verify:
		parts = append(parts, "no store checksum checked (evidence: the workers' majority only; give the store's URL to check the object against it)")
	default:
		parts = append(parts, "no store checksum checked and no worker asked to vouch (evidence: none but the lengths; give the store's URL to check the object against it)")
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
	if len(res.Silent) > 0 {
		parts = append(parts, fmt.Sprintf("owners %s did not answer for some blocks (no consent: those were read from the store)", strings.Join(res.Silent, ", ")))
	}
	return strings.Join(parts, "; ")
}

// noteSilent adds nodes to res.Silent.
func (res *ReadResult) noteSilent(nodes []string) {
	if len(nodes) == 0 {
		return
	}
	res.Silent = slices.Compact(slices.Sorted(slices.Values(append(res.Silent, nodes...))))
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
	// single reads one block per request (a parallel read's tasks).
	single bool
	res    ReadResult
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
		}
		// A CRC detects corruption, not tampering (a worker can forge
		// bytes with the same CRC): only a cryptographic checksum
		// vouches for the whole; otherwise every block is compared with
		// the store's bytes.
		st.storeCheck = !info.Checksum.Cryptographic()
	}
	written, err := r.readAll(ctx, st, w)
	st.res.N, st.res.Version = written, st.version
	switch {
	case err != nil:
		return &st.res, err
	case written != st.size:
		return &st.res, fmt.Errorf("object %s: read %d bytes, want %d", object, written, st.size)
	case sum == nil:
		return &st.res, nil
	}
	if got := sum.Sum(nil); !bytes.Equal(got, want.Value) {
		return &st.res, fmt.Errorf("%w: object %s (version %s): the %d bytes assembled have %s %x, the store's checksum is %x: discard them",
			ErrChecksum, object, st.version, written, want.Algorithm, got, want.Value)
	}
	st.res.Checksum = want
	return &st.res, nil
}

// readAll writes the object's blocks to w, in runs (readBlocks) or, once
// the size is known and Parallel asks for it, several at once
// (readParallel). It returns the bytes written.
func (r *ObjectReader) readAll(ctx context.Context, st *readState, w io.Writer) (int64, error) {
	buf := r.getBuffer() // every request's body, in turn
	defer r.putBuffer(buf)
	var written int64
	for block, n := int64(0), int64(0); st.size < 0 || block*r.BlockSize < st.size; block += n {
		if r.Parallel > 1 && st.size > 0 && block > 0 {
			n, err := r.readParallel(ctx, st, block, w)
			return written + n, err
		}
		res, got, err := r.readBlocks(ctx, st, block, buf, w)
		if err != nil {
			return written, err
		}
		n = got
		if st.size < 0 {
			st.size = res.ObjectSize
		} else if res.ObjectSize != st.size {
			return written, fmt.Errorf("%w: object %s changed size during the read (%d, then %d bytes)", ErrObjectChanged, st.object, st.size, res.ObjectSize)
		}
		st.res.Blocks += n
		written += res.N
		if st.size == 0 {
			break
		}
	}
	return written, nil
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
