package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/placement"
)

// ObjectReader reads whole objects through the workers' caches: for each
// block it looks up the owners, reads from the first that answers, and
// falls back to the next replica on a connection failure, a worker error
// or a wrong-owner answer; when every owner failed it looks the block up
// again after a jittered backoff. A worker's version never replaces the
// coordinators' in the client.
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
	// Verify checks every block against a second source before it is
	// written: the SHA-256 of the received bytes must equal the digest
	// another worker computes from its cache or the blob store (one
	// lookup of Replicas+1 owners names it). A block that fails is
	// discarded and the next owner is tried; if none passes, the read
	// fails. A worker that lies about the bytes can therefore never make
	// ReadObject succeed with wrong data.
	Verify bool
	// OnVerifyFailure, if set, is told of each block discarded: the
	// worker that served it and the workers whose digests disagreed.
	OnVerifyFailure func(object string, block int64, worker string, disagree []string)
	// VerifyFailures, if set, counts discarded blocks.
	VerifyFailures prometheus.Counter

	// bufs keeps the *bytes.Buffer a ReadObject reads each answer into
	// for the next one (reads can run concurrently): a run's buffer is
	// maxRunBlocks blocks, and a fresh one per object costs the zeroing
	// and page faults of that much memory.
	bufs sync.Pool
}

// ErrVerification: no owner's bytes for a block matched the digest of a
// second worker.
var ErrVerification = errors.New("block verification failed")

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

// ReadObject writes the object to w and returns its size. It verifies
// every block's length; the total length is checked against the size the
// workers report.
//
// Once the first block has told the object's size, consecutive blocks
// whose placement names the same owners, in the same order, under the
// same version, are read in one request (up to maxRunBlocks; not when
// Verify is set, which checks block by block): one round trip and one
// response instead of several from the same worker, and the fallback
// order is the same for every block of the run.
func (r *ObjectReader) ReadObject(ctx context.Context, object string, w io.Writer) (int64, error) {
	if r.BlockSize <= 0 {
		return 0, errors.New("client: block size must be positive")
	}
	buf, _ := r.bufs.Get().(*bytes.Buffer) // every request's body, in turn
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() { buf.Reset(); r.bufs.Put(buf) }()
	var written int64
	size := int64(-1)
	for block, n := int64(0), int64(0); size < 0 || block*r.BlockSize < size; block += n {
		var res *datav1.Result
		var err error
		res, n, err = r.readBlocks(ctx, object, block, size, buf, w)
		if err != nil {
			return written, err
		}
		if size < 0 {
			size = res.ObjectSize
		} else if res.ObjectSize != size {
			return written, fmt.Errorf("object %s changed size during the read (%d, then %d bytes)", object, size, res.ObjectSize)
		}
		written += res.N
		if size == 0 {
			break
		}
	}
	if written != size {
		return written, fmt.Errorf("object %s: read %d bytes, want %d", object, written, size)
	}
	return written, nil
}

// readBlocks reads block, and the blocks after it that share its owners
// (see ReadObject; size is the object's size, or -1 before the first
// answer), into buf, then writes them to w. It returns the answer and the
// number of blocks read.
func (r *ObjectReader) readBlocks(ctx context.Context, object string, block, size int64, buf *bytes.Buffer, w io.Writer) (*datav1.Result, int64, error) {
	key := datav1.BlockKey(object, block)
	replicas := max(r.Replicas, 1)
	var lastErr error
	retry := backoff.New(refreshBackoff)
	for attempt := 0; attempt < maxRefresh; attempt++ {
		if attempt > 0 {
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
			return nil, 0, fmt.Errorf("placement of %s block %d: %w", object, block, err)
		}
		// After a failed round, one block at a time.
		n := int64(1)
		if attempt == 0 && !r.Verify {
			n = r.run(ctx, object, block, size, lookup, p)
		}
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
			}
			buf.Reset()
			res, err := datav1.FetchTo(ctx, r.HTTP, req, buf)
			if err == nil {
				res.Data = buf.Bytes()
				if r.Verify {
					err = r.verify(ctx, &digests, req, p.Owners, owner, res, block)
				}
			}
			if err == nil {
				if _, err := w.Write(res.Data); err != nil {
					return nil, 0, err
				}
				return res, n, nil
			}
			lastErr = err
			var de *datav1.Error
			if errors.Is(err, ErrVerification) {
				// Counted and reported by verify; try the next owner.
			} else if errors.As(err, &de) {
				switch {
				case errors.Is(err, datav1.ErrWrongOwner):
					// The worker's placement disagrees with the answer:
					// one of the two is behind, and the worker's version
					// says nothing about which. Skip it, try the next
					// replica, and look the keys up again afterwards.
					r.invalidate(object, block, n)
				case de.Status == http.StatusNotFound, de.Status == http.StatusRequestedRangeNotSatisfiable, de.Status == http.StatusBadRequest:
					return nil, 0, err // the same answer from every owner
				}
			} else {
				r.invalidate(object, block, n) // connection failure: the owner may be gone
			}
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			if r.OnFallback != nil {
				r.OnFallback(object, block, owner.NodeID, err)
			}
		}
		// Every owner failed or disowned the block: look it up again, in
		// case membership changed, then give up.
		r.invalidate(object, block, n)
	}
	return nil, 0, fmt.Errorf("read %s block %d: every owner failed: %w", object, block, lastErr)
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

// verify accepts res from owner when the digest of at least one other
// worker matches it. A lying verifier cannot make wrong bytes pass (its
// digest is only compared with other workers' bytes), and cannot make right
// bytes fail while another honest worker answers.
func (r *ObjectReader) verify(ctx context.Context, dc *digestCache, req datav1.Request, owners []placement.Owner, owner placement.Owner, res *datav1.Result, block int64) error {
	if dc.byNode == nil {
		dc.byNode, dc.failed = map[string]*datav1.Digest{}, map[string]error{}
	}
	sum := sha256.Sum256(res.Data)
	hexSum := hex.EncodeToString(sum[:])
	var disagree []string
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
			if d, err = datav1.FetchDigest(ctx, r.HTTP, vreq); err != nil {
				dc.failed[v.NodeID] = err
				errs = append(errs, err)
				continue
			}
			dc.byNode[v.NodeID] = d
		}
		if d.ObjectSize == res.ObjectSize && d.Length == int64(len(res.Data)) && d.SHA256 == hexSum {
			return nil
		}
		disagree = append(disagree, v.NodeID)
	}
	if len(disagree) == 0 {
		if len(errs) == 0 {
			return fmt.Errorf("cannot verify %s block %d from %s: placement names no second worker to take a digest from (a cluster of one worker; read with verification off)", req.Object, block, owner.NodeID)
		}
		return fmt.Errorf("cannot verify %s block %d from %s: no other worker gave a digest: %w", req.Object, block, owner.NodeID, errors.Join(errs...))
	}
	if r.VerifyFailures != nil {
		r.VerifyFailures.Inc()
	}
	if r.OnVerifyFailure != nil {
		r.OnVerifyFailure(req.Object, block, owner.NodeID, disagree)
	}
	return fmt.Errorf("%w: %s block %d: the %d bytes from worker %s (object size %d) match no other worker's digest (%s disagree); discarded",
		ErrVerification, req.Object, block, len(res.Data), owner.NodeID, res.ObjectSize, strings.Join(disagree, ", "))
}
