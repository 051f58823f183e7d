package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/placement"
)

// The read of one block (readBlocks) is a small loop around two pure
// decisions: classify files each owner's failure into the round's
// attempt, and decide turns a finished round into the next action.

// attempt is what the owners of one block answered in one round.
type attempt struct {
	tried      []string // "node: error" per source
	notFound   int      // owners that answered not found or out of range
	answered   int      // owners that answered at all
	changed    bool     // an owner answered version_changed
	disagreed  bool     // workers disagreed about the bytes
	silent     []string // owners that gave no digest: no consent
	verifyErrs []error
}

// classify files one owner's failure err into a and reports whether the
// cached placement of the block should be dropped (the owner may be gone,
// or its placement and the client's disagree).
func (a *attempt) classify(owner string, err error) (invalidate bool) {
	a.tried = append(a.tried, fmt.Sprintf("%s: %v", owner, err))
	var de *datav1.Error
	var dis *disagreement
	var un *unheard
	switch {
	case errors.As(err, &dis):
		a.disagreed = true
		a.answered++
		a.verifyErrs = append(a.verifyErrs, err)
	case errors.As(err, &un):
		a.silent = append(a.silent, un.nodes()...)
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
			// The worker's placement disagrees with the answer: one of
			// the two is behind, and the worker's version says nothing
			// about which. Skip it, try the next replica, and look the
			// keys up again afterwards.
			return true
		case errors.Is(err, datav1.ErrNotFound), errors.Is(err, datav1.ErrRangeNotSatisfiable):
			// One owner's word: another owner, or the store, may know
			// better.
			a.notFound++
		}
	default:
		return true // connection failure: the owner may be gone
	}
	return false
}

// action is what a read does after a round in which no owner served the
// block.
type action int

const (
	actRetry        action = iota // look the block up again after a backoff
	actSource                     // read the block from the store
	actFailDisagree               // fail: workers disagree, no store to settle it
	actFailChanged                // fail: the object changed in the store
	actFailNotFound               // fail: every owner says it is not there
)

// decide is the action after round a, in which asked owners were asked;
// source says the store can be read (Source set and the version known).
func decide(a *attempt, asked int, source bool) action {
	switch {
	case a.disagreed && source:
		return actSource
	case a.disagreed:
		return actFailDisagree
	case len(a.silent) > 0 && source:
		return actSource // no consent without every owner's answer
	case a.changed && source:
		return actSource // the store is the authority on versions
	case a.changed:
		return actFailChanged
	case a.notFound > 0 && a.notFound == a.answered && a.answered == asked:
		if source {
			return actSource
		}
		return actFailNotFound
	}
	return actRetry
}

// readBlocks reads block, and the blocks after it that share its owners
// (see Read), into buf, then writes them to w. It returns the answer and
// the number of blocks read.
func (r *ObjectReader) readBlocks(ctx context.Context, st *readState, block int64, buf *bytes.Buffer, w io.Writer) (*datav1.Result, int64, error) {
	if r.Client == nil { // ReadFromSource
		return r.fromSource(ctx, st, block, buf, w, nil)
	}
	var all attempt
	retry := backoff.New(refreshBackoff)
	for round := range maxRefresh {
		if round > 0 {
			// Membership is moving (or every owner failed): give the
			// coordinators a moment to see it, jittered so a fleet of
			// readers does not refresh in step.
			if err := backoff.Sleep(ctx, retry.Next()); err != nil {
				return nil, 0, err
			}
		}
		res, n, a, err := r.round(ctx, st, block, round, buf, w)
		if res != nil || err != nil {
			return res, n, err
		}
		if a.lookupErr != nil {
			all.tried = append(all.tried, fmt.Sprintf("placement: %v", a.lookupErr))
			if r.Source != nil && st.known {
				return r.fromSource(ctx, st, block, buf, w, &all)
			}
			return nil, 0, fmt.Errorf("placement of %s block %d: %w", st.object, block, a.lookupErr)
		}
		all.tried = append(all.tried, a.tried...)
		all.verifyErrs = append(all.verifyErrs, a.verifyErrs...)
		st.res.noteSilent(a.silent)
		r.reportVerify(st.object, block, a)
		if act := decide(a.attempt, a.asked, r.Source != nil && st.known); act != actRetry {
			return r.conclude(ctx, act, st, block, a.attempt, &all, buf, w)
		}
		// Every owner failed or disowned the block: look it up again, in
		// case membership changed, then give up.
		r.invalidate(st.object, block, a.blocks)
	}
	if r.Source != nil && st.known {
		return r.fromSource(ctx, st, block, buf, w, &all)
	}
	var last error = errors.New("no owner")
	if len(all.verifyErrs) > 0 {
		last = errors.Join(all.verifyErrs...)
	}
	return nil, 0, fmt.Errorf("read %s block %d: nothing could serve it; tried %s: %w", st.object, block, strings.Join(all.tried, "; "), last)
}

// conclude carries out action act (not actRetry) of round a; all holds
// every round's attempts.
func (r *ObjectReader) conclude(ctx context.Context, act action, st *readState, block int64, a, all *attempt, buf *bytes.Buffer, w io.Writer) (*datav1.Result, int64, error) {
	switch act {
	case actSource:
		return r.fromSource(ctx, st, block, buf, w, all)
	case actFailDisagree:
		return nil, 0, fmt.Errorf("read %s block %d: %w; without the store (talon get --source) it cannot be told which side is right", st.object, block, a.verifyErrs[0])
	case actFailChanged:
		return nil, 0, fmt.Errorf("%w: %s block %d: a worker reports that the store holds another version than %q, which this read started with: read it again (tried %s)",
			ErrObjectChanged, st.object, block, st.version, strings.Join(a.tried, "; "))
	}
	return nil, 0, fmt.Errorf("read %s block %d: every owner answered that it is not there (%s): %w", st.object, block, strings.Join(a.tried, "; "), datav1.ErrNotFound)
}

// roundAttempt is an attempt with what the round asked: how many owners
// and how many blocks, or the lookup's error when it asked none.
type roundAttempt struct {
	*attempt
	asked     int
	blocks    int64
	lookupErr error
}

// round looks the block up and asks its owners in turn. It returns the
// answer (written to w) when one served it, an error that ends the read,
// or neither and what the owners answered (or the lookup's error).
func (r *ObjectReader) round(ctx context.Context, st *readState, block int64, round int, buf *bytes.Buffer, w io.Writer) (*datav1.Result, int64, roundAttempt, error) {
	replicas := max(r.Replicas, 1)
	lookup := replicas
	if r.Verify {
		lookup = min(replicas+2, datav1.MaxReplicas)
	}
	a := roundAttempt{attempt: &attempt{}, blocks: 1}
	p, err := r.Client.Lookup(ctx, datav1.BlockKey(st.object, block), lookup)
	if err != nil {
		a.lookupErr = err
		return nil, 0, a, nil
	}
	if round == 0 && !r.Verify && !st.single {
		a.blocks = r.run(ctx, st.object, block, st.size, lookup, p) // after a failed round, one block at a time
	}
	a.asked = min(replicas, len(p.Owners))
	var digests digestCache
	for i, owner := range p.Owners[:a.asked] { // the extra owners only verify
		res, vouchers, err := r.fetch(ctx, st, block, a.blocks, replicas, p, owner, i == a.asked-1, &digests, buf)
		if err == nil {
			if err := r.checkVersioned(st); err != nil {
				return nil, 0, a, err
			}
			res, n, err := r.accept(ctx, st, served{block: block, n: a.blocks, res: res, vouchers: vouchers, node: owner.NodeID}, w)
			return res, n, a, err
		}
		if ctx.Err() != nil {
			return nil, 0, a, ctx.Err()
		}
		if a.classify(owner.NodeID, err) {
			r.invalidate(st.object, block, a.blocks)
		}
		if r.OnFallback != nil {
			r.OnFallback(st.object, block, owner.NodeID, err)
		}
		var un *unheard
		if errors.As(err, &un) {
			// The silent owner's failure is remembered for the round:
			// every other owner's bytes would lack its vote too.
			break
		}
	}
	return nil, 0, a, nil
}

// fetch asks owner for n blocks from block into buf (buffered, so that a
// failure midway never leaves a partial block in the output before a
// fallback rewrites it) and, with Verify, checks the bytes against the
// other owners' digests. It returns the answer and how many workers
// vouched for it.
func (r *ObjectReader) fetch(ctx context.Context, st *readState, block, n int64, replicas int, p Placement, owner placement.Owner, last bool, digests *digestCache, buf *bytes.Buffer) (*datav1.Result, int, error) {
	req := datav1.Request{
		Addr: owner.Address, Object: st.object, Offset: block * r.BlockSize, Length: n * r.BlockSize,
		Replicas: replicas, Version: uint64(p.Version), TLS: r.TLS, Node: owner.NodeID,
		ObjectVersion: st.version, Fresh: !st.known, Last: last,
	}
	buf.Reset()
	res, err := datav1.FetchTo(ctx, r.HTTP, req, buf)
	if err != nil {
		return nil, 0, err
	}
	res.Data = buf.Bytes()
	if !st.known {
		// The first answer fixes the version every later request of this
		// read asks for.
		st.version, st.size, st.known = res.ObjectVersion, res.ObjectSize, true
		req.ObjectVersion = st.version
	}
	if !r.Verify {
		return res, 1, nil
	}
	vouchers, err := r.verify(ctx, digests, req, p.Owners, owner, res, block)
	return res, vouchers, err
}

// reportVerify counts and reports a round's verification failures (a
// disagreement that Source settles is reported by fromSource, naming the
// workers the store contradicts).
func (r *ObjectReader) reportVerify(object string, block int64, a roundAttempt) {
	if len(a.verifyErrs) == 0 {
		return
	}
	if r.VerifyFailures != nil {
		r.VerifyFailures.Inc()
	}
	if r.OnVerifyFailure != nil && (r.Source == nil || !a.disagreed) {
		msg := a.verifyErrs[0].Error()
		if r.Source != nil && len(a.silent) > 0 {
			msg += "; the block is read from the store"
		}
		r.OnVerifyFailure(object, block, msg)
	}
}

// checkVersioned refuses an unverified read of an object of more than
// one block whose store names no version: each block could come from
// another content of the object (a worker caches a block under the
// version the store named, and there is none to tell two contents apart),
// and nothing would notice. A verified read compares every block with
// the other owners', and a one-block object is one answer.
func (r *ObjectReader) checkVersioned(st *readState) error {
	if r.Verify || st.version != "" || st.size <= r.BlockSize {
		return nil
	}
	return fmt.Errorf("%w: %s (%d bytes, %d blocks): its store sends no ETag or Last-Modified, so an unverified read could join blocks of two contents of it; read it with verification (talon get without --verify=false), or serve it from a store that names versions",
		ErrUnversioned, st.object, st.size, (st.size+r.BlockSize-1)/r.BlockSize)
}
