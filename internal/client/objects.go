package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/datav1"
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
}

// ErrVerification: no owner's bytes for a block matched the digest of a
// second worker.
var ErrVerification = errors.New("block verification failed")

// maxRefresh bounds placement lookups for one block.
const maxRefresh = 3

// refreshBackoff spaces the placement lookups of one block.
var refreshBackoff = backoff.Policy{Initial: 50 * time.Millisecond, Max: time.Second, Jitter: 0.5}

// ReadObject writes the object to w and returns its size. It verifies
// every block's length; the total length is checked against the size the
// workers report.
func (r *ObjectReader) ReadObject(ctx context.Context, object string, w io.Writer) (int64, error) {
	if r.BlockSize <= 0 {
		return 0, errors.New("client: block size must be positive")
	}
	var written int64
	size := int64(-1)
	for block := int64(0); size < 0 || block*r.BlockSize < size; block++ {
		res, err := r.readBlock(ctx, object, block, w)
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

func (r *ObjectReader) readBlock(ctx context.Context, object string, block int64, w io.Writer) (*datav1.Result, error) {
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
				return nil, err
			}
		}
		lookup := replicas
		if r.Verify {
			lookup = min(replicas+2, datav1.MaxReplicas)
		}
		p, err := r.Client.Lookup(ctx, key, lookup)
		if err != nil {
			return nil, fmt.Errorf("placement of %s block %d: %w", object, block, err)
		}
		var digests digestCache
		for i, owner := range p.Owners {
			if i >= replicas {
				break // the extra owners only verify
			}
			// Buffer the block so a failure midway never leaves a partial
			// block in w before a fallback rewrites it.
			req := datav1.Request{
				Addr: owner.Address, Object: object, Offset: block * r.BlockSize, Length: r.BlockSize,
				Replicas: replicas, Version: p.Version, TLS: r.TLS, Node: owner.NodeID,
			}
			res, err := datav1.Fetch(ctx, r.HTTP, req)
			if err == nil && r.Verify {
				err = r.verify(ctx, &digests, req, p.Owners, owner, res, block)
			}
			if err == nil {
				if _, err := w.Write(res.Data); err != nil {
					return nil, err
				}
				return res, nil
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
					// replica, and look the key up again afterwards.
					r.Client.Invalidate(key)
				case de.Status == http.StatusNotFound, de.Status == http.StatusRequestedRangeNotSatisfiable, de.Status == http.StatusBadRequest:
					return nil, err // the same answer from every owner
				}
			} else {
				r.Client.Invalidate(key) // connection failure: the owner may be gone
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if r.OnFallback != nil {
				r.OnFallback(object, block, owner.NodeID, err)
			}
		}
		// Every owner failed or disowned the block: look it up again, in
		// case membership changed, then give up.
		r.Client.Invalidate(key)
	}
	return nil, fmt.Errorf("read %s block %d: every owner failed: %w", object, block, lastErr)
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
func (r *ObjectReader) verify(ctx context.Context, dc *digestCache, req datav1.Request, owners []Owner, owner Owner, res *datav1.Result, block int64) error {
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
