package etcd

import (
	"fmt"
	"sync/atomic"

	"github.com/zeebo/xxh3"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/talonhq/talon/internal/cluster"
)

// memoSize is the number of record versions a decodeMemo remembers; a
// power of two. At 1,000 heartbeats a second it covers several seconds of
// writes, far more than the lag between a write and its watch events.
const memoSize = 4096

// decodeMemo remembers recently decoded record versions, one per slot
// (etcd key) bucket. Every write reaches a coordinator's store up to three
// times: as the answer to its own write, on the snapshot cache's watch and
// on each caller's Watch. With the memo the store decodes each version once
// between all of them, and a version it wrote itself not at all: per
// heartbeat, one decode (of the frame) and one encode (of the stored value)
// on the coordinator that handled it.
//
// An entry names its version by mod revision, which with the key names one
// value for good. A write also leaves an entry before its transaction is
// sent (a watch event may arrive before the transaction's answer), naming
// its version by the encoded value, compared in full; the answer then adds
// the entry by revision.
//
// Records in the memo are shared and never modified. A decodeMemo is safe
// for concurrent use: each bucket is one atomic pointer; a lookup that finds
// another version there misses, and the value is decoded.
type decodeMemo struct {
	byRev   [memoSize]atomic.Pointer[memoEntry] // by slot and mod revision
	pending [memoSize]atomic.Pointer[memoEntry] // writes in flight, by slot
}

// memoEntry is one version of a slot: the record (UpdatedAtUnixMs is the
// writer's stamp or this store's observation time) and the writer's stamp.
type memoEntry struct {
	slot     string
	modRev   int64  // 0: a write in flight, named by val
	val      string // the encoded value while modRev is 0
	writerMs int64
	rec      *cluster.Record
}

func slotHash(slot string) uint64 { return xxh3.HashString(slot) }

func (m *decodeMemo) get(slot string, modRev int64, value []byte) *memoEntry {
	h := slotHash(slot)
	if e := m.byRev[(h^uint64(modRev)*0x9e3779b97f4a7c15)&(memoSize-1)].Load(); e != nil && e.modRev == modRev && e.slot == slot {
		return e
	}
	if e := m.pending[h&(memoSize-1)].Load(); e != nil && e.slot == slot && e.val == string(value) {
		return e
	}
	return nil
}

// put adds e by its revision, or as the write in flight of its slot when
// e.modRev is 0.
func (m *decodeMemo) put(e *memoEntry) {
	h := slotHash(e.slot)
	if e.modRev == 0 {
		m.pending[h&(memoSize-1)].Store(e)
		return
	}
	m.byRev[(h^uint64(e.modRev)*0x9e3779b97f4a7c15)&(memoSize-1)].Store(e)
}

// decodeKV decodes the value of kv stored under slot key. The record's
// UpdatedAtUnixMs becomes this store's observation time of kv's revision
// (state.Observations), not the writer's stamp: ages never compare two
// hosts' clocks. live says kv arrived as a change (a watch event), so the
// writer's stamp feeds the clock skew estimate. A version decoded before,
// or written by this store, comes from the memo, shared: callers never
// modify the record.
func (s *Store) decodeKV(kv *mvccpb.KeyValue, key cluster.Key, live bool) stored {
	st := stored{modRev: kv.ModRevision, lease: kv.Lease}
	slot := string(kv.Key)
	if e := s.memo.get(slot, kv.ModRevision, kv.Value); e != nil && e.rec.Key() == key {
		st.rec = s.stampObserved(slot, kv.ModRevision, e.rec, e.writerMs, live, true)
		if e.modRev == 0 {
			// A write in flight, found by value: remember its stamped
			// version by revision, so the next consumer shares it.
			s.memo.put(&memoEntry{slot: slot, modRev: kv.ModRevision, writerMs: e.writerMs, rec: st.rec})
		}
		return st
	}
	s.stats.decodes.Add(1)
	rec, err := cluster.Decode(kv.Value)
	switch {
	case err != nil:
		st.bad = err
	case rec.Key() != key:
		st.bad = fmt.Errorf("%w: record for %s is stored under the key of %s", cluster.ErrMalformed, rec.Key(), key)
	default:
		writer := rec.UpdatedAtUnixMs
		st.rec = s.stampObserved(slot, kv.ModRevision, rec, writer, live, false)
		s.memo.put(&memoEntry{slot: slot, modRev: kv.ModRevision, writerMs: writer, rec: rec})
	}
	return st
}

// stampObserved returns rec with UpdatedAtUnixMs set to when this store
// first saw version modRev of slot: rec itself when it is stamped so
// already or is not shared yet (freshly decoded), else a copy.
func (s *Store) stampObserved(slot string, modRev int64, rec *cluster.Record, writerMs int64, live, shared bool) *cluster.Record {
	var writer int64
	if live {
		writer = writerMs
	}
	at := s.obs.SeeRev(slot, modRev, writer).UnixMilli()
	if rec.UpdatedAtUnixMs == at {
		return rec
	}
	if !shared {
		rec.UpdatedAtUnixMs = at
		return rec
	}
	c := rec.Clone()
	c.UpdatedAtUnixMs = at
	return c
}
