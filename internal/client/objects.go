package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

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
}

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
		p, err := r.Client.Lookup(ctx, key, replicas)
		if err != nil {
			return nil, fmt.Errorf("placement of %s block %d: %w", object, block, err)
		}
		for _, owner := range p.Owners {
			// Buffer the block so a failure midway never leaves a partial
			// block in w before a fallback rewrites it.
			res, err := datav1.Fetch(ctx, r.HTTP, datav1.Request{
				Addr: owner.Address, Object: object, Offset: block * r.BlockSize, Length: r.BlockSize,
				Replicas: replicas, Version: p.Version,
			})
			if err == nil {
				if _, err := w.Write(res.Data); err != nil {
					return nil, err
				}
				return res, nil
			}
			lastErr = err
			var de *datav1.Error
			if errors.As(err, &de) {
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
