package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/placement"
)

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

// verify accepts res from owner when every other owner placement names
// answered with a digest, none of them disagrees, and a strict majority
// of the owners, at least two, owner included, agree on its SHA-256.
// The sources are chosen by placement, not by the owner, and a worker's
// vote is only ever its own bytes or its own digest, so a set of
// colluding workers cannot outvote an honest worker that answers: it can
// at most make the workers disagree, which the caller settles with the
// store or reports without blaming anyone. Consent is an answer: an
// owner that gave no digest (refused, timed out, reset, overloaded)
// never counts as agreement, and while one is unheard the block is not
// accepted from workers at all (an *unheard error): otherwise
// colluders that silence the honest owner, by holding its connections
// for instance, would be the majority of the owners that speak.
func (r *ObjectReader) verify(ctx context.Context, dc *digestCache, req datav1.Request, owners []placement.Owner, owner placement.Owner, res *datav1.Result, block int64) (vouchers int, err error) {
	if dc.byNode == nil {
		dc.byNode, dc.failed = map[string]*datav1.Digest{}, map[string]error{}
	}
	sum := sha256.Sum256(res.Data)
	mine := hex.EncodeToString(sum[:])
	sides := map[string][]string{mine: {owner.NodeID}}
	silent := map[string]error{}
	for _, v := range owners {
		if v.NodeID == owner.NodeID {
			continue
		}
		d, err := r.digestOf(ctx, dc, req, v)
		if err != nil {
			if !cannotVouch(err) {
				silent[v.NodeID] = err
			}
			continue
		}
		theirs := d.SHA256
		if d.ObjectSize != res.ObjectSize || d.Length != int64(len(res.Data)) {
			theirs = fmt.Sprintf("%s (size %d, length %d)", d.SHA256, d.ObjectSize, d.Length)
		}
		sides[theirs] = append(sides[theirs], v.NodeID)
	}
	agree := len(sides[mine])
	switch {
	case len(sides) > 1:
		return agree, &disagreement{object: req.Object, block: block, sides: sides, asked: len(owners)}
	case len(silent) > 0:
		return agree, &unheard{object: req.Object, block: block, server: owner.NodeID, vouchers: agree, asked: len(owners), silent: silent}
	case agree >= 2 && 2*agree > len(owners):
		return agree, nil
	}
	why := fmt.Sprintf("only %d of the %d workers placement names vouched for the bytes from %s; a strict majority, at least 2, is needed", agree, len(owners), owner.NodeID)
	if len(owners) < 2 {
		why = "placement names no second worker to take a digest from (a cluster of one worker; read with verification off, or give the store with --source)"
	}
	return agree, fmt.Errorf("%w: cannot verify %s block %d: %s", ErrVerification, req.Object, block, why)
}

// cannotVouch reports whether an owner's digest error is an answer that
// it does not hold the block and could not load it: its store said the
// object is not there, or failed for it. Colluding workers cannot make an
// honest owner's store answer so, unlike a refusal, a timeout, a reset or
// an overload (429, 503), which they can cause by holding its
// connections or its budgets. Such an owner does not vouch, and counts
// against the majority, but it is not silent: a cached block stays
// readable while the store is down (the others vouch).
//
// An owner this client refused itself (its credential on the client's deny
// list, or not the identity placement names: pki.ErrIdentity in the
// handshake, datav1.ErrIdentity after it) does not
// vouch either; that refusal is the client's own, not something the
// colluders did to the owner.
func cannotVouch(err error) bool {
	return errors.Is(err, datav1.ErrNotFound) || errors.Is(err, datav1.ErrBackend) || errors.Is(err, datav1.ErrRangeNotSatisfiable) ||
		errors.Is(err, datav1.ErrIdentity) || errors.Is(err, pki.ErrIdentity)
}

// digestOf returns v's digest of req's range, asking v once per block
// (dc remembers answers and failures). Digests are asked with last=1: the
// client has no other source of v's vote, so a warming worker waits for
// its rate rather than refuse.
func (r *ObjectReader) digestOf(ctx context.Context, dc *digestCache, req datav1.Request, v placement.Owner) (*datav1.Digest, error) {
	if d, ok := dc.byNode[v.NodeID]; ok {
		return d, nil
	}
	if err, failed := dc.failed[v.NodeID]; failed {
		return nil, err
	}
	req.Addr, req.Node, req.Last = v.Address, v.NodeID, true
	d, err := r.digest(ctx, req)
	if err != nil {
		dc.failed[v.NodeID] = err
		return nil, err
	}
	dc.byNode[v.NodeID] = d
	return d, nil
}

// unheard is a verification failure where owners placement names gave no
// digest of a block (silent: node -> why), so that the owners that vouch
// for it, however many, are not taken as consent.
type unheard struct {
	object   string
	block    int64
	server   string // the owner that served the bytes
	vouchers int
	asked    int
	silent   map[string]error
}

func (u *unheard) Error() string {
	var parts []string
	for _, n := range u.nodes() {
		parts = append(parts, fmt.Sprintf("%s: %v", n, u.silent[n]))
	}
	return fmt.Sprintf("%s block %d: owners %s did not answer for it (%s); the %d of %d owners that vouched for the bytes from %s are not taken as consent while an owner is silent",
		u.object, u.block, strings.Join(u.nodes(), ", "), strings.Join(parts, "; "), u.vouchers, u.asked, u.server)
}

func (u *unheard) Unwrap() error { return ErrVerification }

// nodes returns the silent owners, sorted.
func (u *unheard) nodes() []string { return slices.Sorted(maps.Keys(u.silent)) }

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
