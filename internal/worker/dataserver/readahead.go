package dataserver

// This file is read-ahead: the one decision of which blocks to prefetch
// after a read (planPrefetch, a pure function), the access pattern it
// depends on (sequential, with the per-client streams that remember what
// each client read), and the loop that gathers their inputs and acts
// (Server.readAhead). See "Read-ahead" in doc.go.

import (
	"math/bits"
	"sync"

	"github.com/talonhq/talon/internal/blob"
)

const (
	// maxStreamGap is the farthest back, in blocks, a read's previous
	// read of the same object may be for the read to continue it.
	maxStreamGap = 63
	// maxStreams bounds the (client, object) streams remembered; past it
	// one is forgotten for each new one.
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

// sequential reports whether a read whose first block is first continues
// the client's previous reads of the object: prev is the highest block
// below first it read (ok false when none is remembered), and ownedGap
// is how many of the blocks between prev and first this worker owns.
// The client read the blocks between from their owners, so a gap of
// blocks other workers own is still in order; a block this worker owns
// that the client skipped makes the read sparse (block 0, then 10, then
// 20: read-ahead of 1 to 4 would load blocks nobody reads), and so does
// a gap wider than maxStreamGap.
func sequential(ok bool, prev, first int64, ownedGap int) bool {
	return ok && prev < first && first-prev-1 <= maxStreamGap && ownedGap == 0
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

// streams remembers each client's reads of each object (at most
// maxStreams of them). It is safe for concurrent use.
type streams struct {
	mu sync.Mutex // guards m
	m  map[streamKey]stream
}

func newStreams() *streams { return &streams{m: map[streamKey]stream{}} }

// observe records that client read blocks [first, last] of object and
// returns the highest block below first it read before, if remembered.
func (s *streams) observe(client, object string, first, last int64) (prev int64, ok bool) {
	k := streamKey{client, object}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, known := s.m[k]
	if known {
		prev, ok = st.prevBelow(first)
		if last < st.last-maxStreamGap { // a seek back: a new stream
			st = stream{last: last}
		}
	} else {
		if len(s.m) >= maxStreams {
			for old := range s.m { // forget one, any
				delete(s.m, old)
				break
			}
		}
		st = stream{last: last}
	}
	st.add(first, last)
	s.m[k] = st
	return prev, ok
}

// readAhead acts on planPrefetch for a read of blocks [first, last] of
// key by client: it gathers the decision's inputs (the access pattern,
// ownership and residency of the next Config.ReadAhead blocks, the
// cache's free read-ahead slots, the warm-up budget) and starts the
// loads chosen. A load is charged to the warm-up bound, and counted,
// only when the cache starts it.
func (s *Server) readAhead(client, key string, info blob.Info, first, last int64) {
	if s.cfg.ReadAhead <= 0 {
		return
	}
	prev, ok := s.streams.observe(client, key, first, last)
	gap := 0
	if ok && prev < first && first-prev-1 <= maxStreamGap {
		for i := prev + 1; i < first && gap == 0; i++ {
			if owned, _ := s.cfg.Ownership.Owns(key, i); owned {
				gap++
			}
		}
	}
	if !sequential(ok, prev, first, gap) {
		return
	}
	lastBlock := (info.Size - 1) / s.blockSize
	in := prefetchInput{sequential: true, slots: s.cfg.Cache.PrefetchSlots()}
	in.warming, in.tokens = s.warm.budget()
	for i := last + 1; i <= min(last+int64(s.cfg.ReadAhead), lastBlock); i++ {
		owned, _ := s.cfg.Ownership.Owns(key, i)
		in.next = append(in.next, blockState{owned: owned, cold: owned && s.cfg.Cache.Cold(key, info, i)})
	}
	for _, j := range planPrefetch(in) {
		s.cfg.Cache.Prefetch(key, info, last+1+int64(j), s.warm.charge)
	}
}
