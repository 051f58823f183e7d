package dataserver

// This file is read-ahead: the one decision of which blocks to prefetch
// after a read (planPrefetch, a pure function), the access pattern it
// depends on (sequential, with the per-client streams that remember what
// each client read), and the loop that gathers their inputs and acts
// (Server.readAhead). See "Read-ahead" in doc.go.

import (
	"math/bits"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/netlimit"
)

const (
	// maxStreamGap is the farthest back, in blocks, a read's previous
	// read of the same object may be for the read to continue it.
	maxStreamGap = 63
	// minWindow is how many blocks before a read tell its pattern, at
	// least (stream.window).
	minWindow = 8
	// maxStreams bounds the (client, object) streams remembered.
	maxStreams = 4096
)

// blockState is what read-ahead knows of one block after a read.
type blockState struct {
	owned bool // this worker owns it (placement)
	cold  bool // neither resident at the object's version nor loading
}

// prefetchInput is everything the read-ahead decision depends on.
type prefetchInput struct {
	// sequential: the read continues the client's previous read of the
	// object (see sequential); read-ahead follows no other pattern.
	sequential bool
	// next are the Config.ReadAhead blocks after the read's last one
	// (fewer at the object's end), in order.
	next []blockState
	// slots is how many more read-ahead loads may be in flight now (the
	// cache's MaxPrefetches less those loading).
	slots int
	// warming: the warm-up bound applies, and tokens is how many block
	// loads it still allows now.
	warming bool
	tokens  int
}

// planPrefetch is the read-ahead decision: the indexes into in.next of
// the blocks to load, nearest first. Only after a sequential read; only
// blocks this worker owns that are cold (a resident or loading block
// costs nothing); at most in.slots of them, and while warming up at most
// in.tokens.
func planPrefetch(in prefetchInput) []int {
	if !in.sequential {
		return nil
	}
	budget := in.slots
	if in.warming {
		budget = min(budget, in.tokens)
	}
	var out []int
	for i, b := range in.next {
		if len(out) >= budget {
			break
		}
		if b.owned && b.cold {
			out = append(out, i)
		}
	}
	return out
}

// sequential is the access pattern rule: a read is sequential when the
// client read some of the blocks of its window here (seen, see
// stream.window) and skipped at most half as many of those this worker
// owns (holes). In order, the client reads the blocks between from their
// owners, so blocks other workers own are no holes, and a parallel
// reader's requests arriving out of order leave few. A sparse reader
// leaves as many holes as reads or more (block 0, then 10, then 20; or
// every other block): read-ahead would load blocks nobody reads.
func sequential(seen, holes int) bool {
	return seen > 0 && 2*holes <= seen
}

// streamKey names one client's reads of one object.
type streamKey struct{ client, object string }

// stream is what a worker remembers of one client's reads of one object:
// the highest block read and which of the 64 blocks up to it were read
// (bit i: block last-i).
type stream struct {
	last int64
	seen uint64
}

// prevBelow returns the highest block below first the stream read, if
// it is one of the 64 it remembers.
func (s stream) prevBelow(first int64) (int64, bool) {
	d := s.last - first + 1 // the bit of block first-1
	switch {
	case d <= 0:
		return s.last, true
	case d >= 64:
		return 0, false
	}
	below := s.seen >> d // bit 0: block first-1
	if below == 0 {
		return 0, false
	}
	return first - 1 - int64(bits.TrailingZeros64(below)), true
}

// has reports whether the stream read block b.
func (s stream) has(b int64) bool {
	d := s.last - b
	return d >= 0 && d < 64 && s.seen>>d&1 == 1
}

// window returns what the stream tells of a read whose first block is
// first: of the blocks of its window, how many the client read here
// (seen) and how many it did not that owned reports this worker owns
// (holes). The window is the minWindow blocks before first, or back to
// the highest block below first the client read, when that is farther
// (at most maxStreamGap+1 blocks; none read that far: an empty window).
func (s stream) window(first int64, owned func(int64) bool) (seen, holes int) {
	q, ok := s.prevBelow(first)
	if !ok || first-q-1 > maxStreamGap {
		return 0, 0
	}
	for b := first - 1; b >= max(0, min(first-minWindow, q)); b-- {
		switch {
		case s.has(b):
			seen++
		case owned(b):
			holes++
		}
	}
	return seen, holes
}

// add records blocks [first, last] as read.
func (s *stream) add(first, last int64) {
	if last > s.last {
		shift := last - s.last
		if shift >= 64 {
			s.seen = 0
		} else {
			s.seen <<= shift
		}
		s.last = last
	}
	for b := max(first, s.last-63); b <= last; b++ {
		s.seen |= 1 << (s.last - b)
	}
}

// streams remembers each client's reads of each object, at most
// maxStreams of them in a netlimit.Keyed (those idle for a minute go first
// when it is full, then the least recently used). It is safe for
// concurrent use.
type streams struct {
	k *netlimit.Keyed[streamKey, *stream]
}

func newStreams() *streams {
	return &streams{k: netlimit.NewKeyed[streamKey](maxStreams, time.Minute, func() *stream { return &stream{} }, nil)}
}

// observe records that client read blocks [first, last] of object and
// returns the stream with them.
func (s *streams) observe(client, object string, first, last int64) (out stream) {
	s.k.Do(streamKey{client, object}, time.Now(), func(st *stream) {
		// A new stream (nothing read yet) or a seek back starts afresh.
		if st.seen == 0 || last < st.last-maxStreamGap {
			*st = stream{last: last}
		}
		st.add(first, last)
		out = *st
	})
	return out
}

// streamRead is one read, blocks [first, last], and its client's stream
// of the object with it.
type streamRead struct {
	first, last int64
	stream      stream
}

// observe records req's read of [req.offset, end) in its client's stream
// (when read-ahead is on).
func (s *Server) observe(req *request, end int64) streamRead {
	r := streamRead{first: req.offset / s.blockSize, last: (end - 1) / s.blockSize}
	if s.cfg.ReadAhead > 0 && end > req.offset {
		r.stream = s.streams.observe(req.client, req.key, r.first, r.last)
	}
	return r
}

// readAhead acts on planPrefetch after read r of key: it gathers the
// decision's inputs (the access pattern, ownership and residency of the
// next Config.ReadAhead blocks, the cache's free read-ahead slots, the
// warm-up budget) and starts the loads chosen. A load is charged to the
// warm-up bound, and counted, only when the cache starts it.
func (s *Server) readAhead(key string, info blob.Info, r streamRead) {
	if s.cfg.ReadAhead <= 0 {
		return
	}
	owned := func(b int64) bool { o, _ := s.cfg.Ownership.Owns(key, b); return o }
	if f, ok := s.cfg.Ownership.(FirstOwnership); ok {
		owned = func(b int64) bool { return f.OwnsFirst(key, b) }
	}
	in := prefetchInput{sequential: sequential(r.stream.window(r.first, owned))}
	if !in.sequential { // planPrefetch plans nothing: spare the look-ups
		return
	}
	lastBlock := (info.Size - 1) / s.blockSize
	in.slots = s.cfg.Cache.PrefetchSlots()
	in.warming, in.tokens = s.warm.budget()
	for i := r.last + 1; i <= min(r.last+int64(s.cfg.ReadAhead), lastBlock); i++ {
		o := owned(i)
		in.next = append(in.next, blockState{owned: o, cold: o && s.cfg.Cache.Cold(key, info, i)})
	}
	for _, j := range planPrefetch(in) {
		s.cfg.Cache.Prefetch(key, info, r.last+1+int64(j), s.warm.charge)
	}
}
