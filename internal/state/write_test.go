package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// scripted is a Slots over one slot in memory: its reads and swaps are
// counted, cached reads return what cached holds, and before each swap
// interfere may change the slot (another writer landing first).
type scripted struct {
	rec     *cluster.Record
	version int
	cached  *Slot // what a cached read returns; nil: cached reads are fresh

	interfere func(s *scripted, swap int)
	noCurrent bool  // a lost swap does not report the slot
	readErr   error // returned by fresh reads

	cachedReads, freshReads, swaps int
	applied                        []Change
}

func (s *scripted) fresh() Slot {
	return Slot{Record: s.rec.Clone(), Version: strconv.Itoa(s.version), Revision: NewRevision(strconv.Itoa(s.version)), Fresh: true}
}

func (s *scripted) Read(_ context.Context, _ cluster.Key, fresh bool) (Slot, error) {
	if !fresh && s.cached != nil {
		s.cachedReads++
		c := *s.cached
		s.cached = nil
		return c, nil
	}
	s.freshReads++
	if s.readErr != nil {
		return Slot{}, s.readErr
	}
	return s.fresh(), nil
}

func (s *scripted) Swap(_ context.Context, _ cluster.Key, cur Slot, ch Change) (Swapped, error) {
	s.swaps++
	if s.interfere != nil {
		s.interfere(s, s.swaps)
	}
	if cur.Version != strconv.Itoa(s.version) {
		if s.noCurrent {
			return Swapped{}, nil
		}
		c := s.fresh()
		return Swapped{Current: &c}, nil
	}
	s.version++
	s.rec = ch.Record.Clone()
	s.applied = append(s.applied, ch)
	return Swapped{Applied: true, Revision: NewRevision(strconv.Itoa(s.version)), Record: ch.Record.Clone()}, nil
}

func testRecord(inc string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID: "c1", NodeID: "w1", Role: cluster.RoleWorker, IncarnationID: inc,
		Address: "127.0.0.2:7000", Version: "test", StartTimeUnixMs: 1, HeartbeatSeq: seq, Health: cluster.HealthHealthy,
	}
}

var (
	testKey = cluster.Key{ClusterID: "c1", Role: cluster.RoleWorker, NodeID: "w1"}
	testNow = func() time.Time { return time.UnixMilli(1_000_000) }
)

func TestWriteUpsert(t *testing.T) {
	ctx := context.Background()
	hb := func(s *scripted, rec *cluster.Record) (WriteResult, error) {
		return Write(ctx, s, testKey, 4, Upsert(rec, cluster.UpdateHeartbeat, time.Minute, 0, testNow))
	}
	reg := func(s *scripted, rec *cluster.Record) (WriteResult, error) {
		return Write(ctx, s, testKey, 4, Upsert(rec, cluster.UpdateRegister, time.Minute, 0, testNow))
	}

	t.Run("AcceptedOnACachedReadCostsOneSwap", func(t *testing.T) {
		s := &scripted{rec: testRecord("a", 1), version: 1}
		c := s.fresh()
		c.Fresh = false
		s.cached = &c
		res, err := hb(s, testRecord("a", 2))
		if err != nil || res.Outcome != OutcomeAccepted || res.Decision != cluster.DecisionAdvance {
			t.Fatalf("heartbeat = %+v, %v; want accepted advance", res, err)
		}
		if s.freshReads != 0 || s.swaps != 1 {
			t.Errorf("took %d fresh reads and %d swaps, want 0 and 1", s.freshReads, s.swaps)
		}
		if got := s.applied[0]; got.Record.UpdatedAtUnixMs != testNow().UnixMilli() || got.TTL != time.Minute || len(got.Encoded) == 0 || got.KeepLease {
			t.Errorf("change = stamp %d ttl %s encoded %d bytes keep %v; want the clock's stamp, the TTL, the encoding, a refreshed lease",
				got.Record.UpdatedAtUnixMs, got.TTL, len(got.Encoded), got.KeepLease)
		}
	})

	t.Run("RejectionOnACachedReadIsConfirmedFresh", func(t *testing.T) {
		// The cache still holds seq 5; the slot was removed since: the
		// registration of seq 1 inserts.
		s := &scripted{}
		c := Slot{Record: testRecord("a", 5), Version: "7"}
		s.cached = &c
		res, err := reg(s, testRecord("a", 1))
		if err != nil || res.Decision != cluster.DecisionInsert {
			t.Fatalf("register = %+v, %v; want insert", res, err)
		}
		if s.cachedReads != 1 || s.freshReads != 1 {
			t.Errorf("reads: %d cached, %d fresh; want 1 and 1", s.cachedReads, s.freshReads)
		}
	})

	t.Run("RejectionOnAFreshReadIsFinal", func(t *testing.T) {
		s := &scripted{rec: testRecord("a", 5), version: 3}
		res, err := hb(s, testRecord("a", 4))
		if err != nil || res.Outcome != OutcomeStale || res.Record.HeartbeatSeq != 5 || res.Revision.String() != "3" {
			t.Fatalf("stale heartbeat = %+v, %v; want stale with the stored record at revision 3", res, err)
		}
		if s.swaps != 0 || s.freshReads != 1 {
			t.Errorf("took %d swaps and %d fresh reads, want 0 and 1", s.swaps, s.freshReads)
		}
	})

	t.Run("LostCompareDecidesAgainOnWhatLanded", func(t *testing.T) {
		s := &scripted{rec: testRecord("a", 1), version: 1}
		s.interfere = func(s *scripted, swap int) {
			if swap == 1 {
				s.rec, s.version = testRecord("b", 0), s.version+1 // a restart lands first
			}
		}
		res, err := hb(s, testRecord("a", 2))
		if err != nil || res.Outcome != OutcomeStale || res.Decision != cluster.DecisionSuperseded {
			t.Fatalf("heartbeat after a restart landed = %+v, %v; want stale (superseded)", res, err)
		}
		if s.swaps != 1 || s.freshReads != 1 {
			t.Errorf("took %d swaps and %d fresh reads; want 1 and 1 (the lost compare reported the slot)", s.swaps, s.freshReads)
		}
	})

	t.Run("LostCompareWithoutTheSlotReadsAgain", func(t *testing.T) {
		s := &scripted{rec: testRecord("a", 1), version: 1, noCurrent: true}
		s.interfere = func(s *scripted, swap int) {
			if swap == 1 {
				s.rec, s.version = testRecord("a", 2), s.version+1
			}
		}
		res, err := hb(s, testRecord("a", 3))
		if err != nil || res.Outcome != OutcomeAccepted || s.rec.HeartbeatSeq != 3 {
			t.Fatalf("heartbeat = %+v, %v (stored seq %d); want accepted seq 3", res, err, s.rec.HeartbeatSeq)
		}
		if s.swaps != 2 || s.freshReads != 2 {
			t.Errorf("took %d swaps and %d fresh reads, want 2 and 2", s.swaps, s.freshReads)
		}
	})

	t.Run("ConflictAfterAttempts", func(t *testing.T) {
		s := &scripted{rec: testRecord("a", 1), version: 1}
		seq := uint64(1)
		s.interfere = func(s *scripted, _ int) { seq++; s.rec, s.version = testRecord("a", seq), s.version+1 }
		_, err := reg(s, testRecord("b", 0))
		if !errors.Is(err, ErrConflict) || s.swaps != 4 {
			t.Fatalf("error %v after %d swaps; want ErrConflict after 4", err, s.swaps)
		}
	})

	t.Run("BackendErrorIsReturned", func(t *testing.T) {
		s := &scripted{readErr: ErrUnavailable}
		if _, err := reg(s, testRecord("a", 0)); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("error %v, want ErrUnavailable", err)
		}
	})

	t.Run("UnsupportedVersionIsConfirmedThenRefused", func(t *testing.T) {
		s := &scripted{}
		c := Slot{Bad: &cluster.VersionError{Version: 9}}
		s.cached = &c
		// The fresh read finds the slot empty: the cached view was outdated.
		if res, err := reg(s, testRecord("a", 0)); err != nil || res.Decision != cluster.DecisionInsert {
			t.Fatalf("register = %+v, %v; want insert after the fresh read", res, err)
		}
		_, _, err := Upsert(testRecord("a", 0), cluster.UpdateRegister, time.Minute, 0, testNow)(Slot{Bad: &cluster.VersionError{Version: 9}, Fresh: true})
		if !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("deciding on a record of schema 9: %v, want ErrUnsupportedVersion", err)
		}
	})

	t.Run("UnreadableValueCountsAsEmpty", func(t *testing.T) {
		_, final, err := Upsert(testRecord("a", 3), cluster.UpdateHeartbeat, time.Minute, 0, testNow)(Slot{Bad: cluster.ErrMalformed, Fresh: true})
		if err != nil || final == nil || final.Outcome != OutcomeNotFound {
			t.Fatalf("heartbeat over garbage = %+v, %v; want not_found (register again)", final, err)
		}
	})
}

func TestWriteRemoveAndPropose(t *testing.T) {
	late := testRecord("a", 4)
	late.Late = true
	for _, tc := range []struct {
		name   string
		cur    Slot
		decide Decide
		want   Outcome // 0: a change
		delete bool
	}{
		{"RemoveMatching", Slot{Record: testRecord("a", 4)}, Remove("a"), 0, true},
		{"RemoveOther", Slot{Record: testRecord("b", 4)}, Remove("a"), OutcomeStale, false},
		{"RemoveMissing", Slot{}, Remove("a"), OutcomeNotFound, false},
		{"RemoveUnreadableByHolder", Slot{Bad: cluster.ErrMalformed, Holder: "a"}, Remove("a"), 0, true},
		{"RemoveUnreadableWithoutHolder", Slot{Bad: cluster.ErrMalformed}, Remove("a"), OutcomeStale, false},
		{"LateAtSeq", Slot{Record: testRecord("a", 4)}, Propose("a", 4, TransitionLate, 0), 0, false},
		{"LateAfterAHeartbeat", Slot{Record: testRecord("a", 5)}, Propose("a", 4, TransitionLate, 0), OutcomeStale, false},
		{"LateOfAnotherIncarnation", Slot{Record: testRecord("b", 4)}, Propose("a", 4, TransitionLate, 0), OutcomeStale, false},
		{"LateAlreadyLate", Slot{Record: late}, Propose("a", 4, TransitionLate, 0), OutcomeStale, false},
		{"LateMissing", Slot{}, Propose("a", 4, TransitionLate, 0), OutcomeNotFound, false},
		{"ExpireAtSeq", Slot{Record: testRecord("a", 4)}, Propose("a", 4, TransitionExpire, 0), 0, true},
		{"ExpireLate", Slot{Record: late}, Propose("a", 4, TransitionExpire, 0), 0, true},
		{"ExpireAfterAHeartbeat", Slot{Record: testRecord("a", 5)}, Propose("a", 4, TransitionExpire, 0), OutcomeStale, false},
		{"ExpireUnreadable", Slot{Bad: cluster.ErrMalformed}, Propose("a", 4, TransitionExpire, 0), OutcomeStale, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cur.Fresh = true
			ch, final, err := tc.decide(tc.cur)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != 0 {
				if final == nil || final.Outcome != tc.want {
					t.Fatalf("final %+v, want outcome %s", final, tc.want)
				}
				return
			}
			if final != nil {
				t.Fatalf("final %+v, want a change", final)
			}
			if tc.delete != (ch.Record == nil) {
				t.Fatalf("change deletes %v, want %v", ch.Record == nil, tc.delete)
			}
			if ch.Record != nil && (!ch.Record.Late || !ch.KeepLease || ch.Record.HeartbeatSeq != 4 || len(ch.Encoded) == 0) {
				t.Errorf("late change = %+v keep %v; want the record at seq 4, late, encoded, keeping its lease", ch.Record, ch.KeepLease)
			}
			if ch.Record != nil && tc.cur.Record.Late {
				t.Errorf("the stored record was modified")
			}
		})
	}
}

func TestTransitionStringAndCounts(t *testing.T) {
	if TransitionLate.String() != "late" || TransitionExpire.String() != "expire" || Transition(9).String() != "invalid" {
		t.Errorf("names: %s %s %s", TransitionLate, TransitionExpire, Transition(9))
	}
	if err := ValidateTransition(testKey, "a", Transition(0)); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("transition 0: %v, want ErrInvalidRecord", err)
	}
	var c TransitionCounts
	c.Note(TransitionLate, OutcomeAccepted, nil)
	c.Note(TransitionLate, OutcomeAccepted, nil)
	c.Note(TransitionExpire, 0, ErrUnavailable)
	got := map[string]uint64{}
	c.Each(func(tr Transition, o string, n uint64) { got[tr.String()+"/"+o] = n })
	if len(got) != 8 || got["late/accepted"] != 2 || got["expire/error"] != 1 || got["late/stale"] != 0 {
		t.Errorf("counts %v", got)
	}
}

// TestUpsertChecksFieldsOnEveryPath checks that moving the field check
// into the decision (one check per heartbeat: the encoding's, or
// ValidateRecord's for a rejection) still refuses an invalid record
// whatever the decision.
func TestUpsertChecksFieldsOnEveryPath(t *testing.T) {
	bad := testRecord("a", 2)
	bad.Address = "not an address"
	for name, cur := range map[string]Slot{
		"accepted (encoded)":   {Record: testRecord("a", 1), Fresh: true},
		"duplicate (rejected)": {Record: testRecord("a", 2), Fresh: true},
		"unregistered":         {Fresh: true},
	} {
		_, final, err := Upsert(bad, cluster.UpdateHeartbeat, time.Minute, 0, testNow)(cur)
		if !errors.Is(err, ErrInvalidRecord) || final != nil {
			t.Errorf("%s: final %+v, error %v; want ErrInvalidRecord", name, final, err)
		}
	}
}

// TestUpsertStampsStatusTime: a full write stamps StatusAtUnixMs with the
// store's clock; a change marked Renew carries the stored status time, so
// readers can say how old the counters are while renewals keep the lease.
func TestUpsertStampsStatusTime(t *testing.T) {
	stored := testRecord("a", 1)
	stored.StatusAtUnixMs = 123
	cur := Slot{Record: stored, Version: "1"}
	next := testRecord("a", 2)
	next.StatusAtUnixMs = 999_999_999 // a process's value is ignored
	full, _, err := Upsert(next, cluster.UpdateHeartbeat, time.Minute, 0, testNow)(cur)
	if err != nil || full.Renew || full.Record.StatusAtUnixMs != testNow().UnixMilli() {
		t.Fatalf("status write: renew %v statusAt %d, %v; want a write stamped %d", full.Renew, full.Record.StatusAtUnixMs, err, testNow().UnixMilli())
	}
	renew, _, err := Upsert(next, cluster.UpdateHeartbeat, time.Minute, 12, testNow)(cur)
	if err != nil || !renew.Renew || renew.Record.StatusAtUnixMs != 123 {
		t.Fatalf("renewal: renew %v statusAt %d, %v; want a renewal keeping 123", renew.Renew, renew.Record.StatusAtUnixMs, err)
	}
}

// TestEvictProtectsOperatorEvents: a flood of worker-driven events evicts
// the flooding sources' own oldest first, then other unprotected events,
// never an operator or security event while anything else can go (issue
// 47: three workers flushed the operator's cordons and every revocation).
func TestEvictProtectsOperatorEvents(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	var events []NodeEvent
	add := func(typ NodeEventType, node string) {
		at = at.Add(time.Millisecond)
		events = append(events, NodeEvent{ID: fmt.Sprintf("e%05d", len(events)), ClusterID: "c", Time: at, Type: typ, Role: "worker", NodeID: node})
	}
	add("node_cordoned", "w-ops")
	add("node_revoked", "w-bad")
	add("node_joined", "w-quiet")
	for range 3000 { // three flooding workers
		for _, w := range []string{"w-1", "w-2", "w-3"} {
			add("node_readiness_changed", w)
		}
	}
	add("node_uncordoned", "w-ops")
	kept := KeepEvents(events, DefaultEventMax)
	if len(kept) != DefaultEventMax {
		t.Fatalf("kept %d events; want %d", len(kept), DefaultEventMax)
	}
	bySource := map[string]int{}
	protected := 0
	for _, e := range kept {
		bySource[e.NodeID]++
		if Protected(e) {
			protected++
		}
	}
	if protected != 3 {
		t.Errorf("kept %d of 3 operator and security events: %v", protected, bySource)
	}
	if bySource["w-quiet"] != 1 {
		t.Errorf("the quiet worker's join was evicted by the flood: %v", bySource)
	}
	// The flooders share what is left, evenly (their oldest went first).
	if a, b, c := bySource["w-1"], bySource["w-2"], bySource["w-3"]; a+b+c != DefaultEventMax-4 || max(a, b, c)-min(a, b, c) > 1 {
		t.Errorf("flooders kept %d, %d and %d events; want %d in all, shared evenly", a, b, c, DefaultEventMax-4)
	}
	// A flooder over its quota goes before another source's older events.
	var mixed []NodeEvent
	for i := range 50 {
		mixed = append(mixed, NodeEvent{ID: fmt.Sprintf("q%03d", i), Time: at.Add(time.Duration(i) * time.Millisecond), Type: "node_joined", Role: "worker", NodeID: fmt.Sprintf("q%d", i)})
	}
	for i := range DefaultEventMax {
		mixed = append(mixed, NodeEvent{ID: fmt.Sprintf("f%05d", i), Time: at.Add(time.Second + time.Duration(i)*time.Millisecond), Type: "node_health_changed", Role: "worker", NodeID: "w-flood"})
	}
	for _, e := range Evict(mixed, DefaultEventMax) {
		if e.NodeID != "w-flood" {
			t.Fatalf("evicted %s of %s while w-flood was over its quota", e.ID, e.NodeID)
		}
	}
	// Only protected events over the cap: the oldest of them go.
	var ops []NodeEvent
	for i := range DefaultEventMax + 5 {
		ops = append(ops, NodeEvent{ID: fmt.Sprintf("p%05d", i), Time: at.Add(time.Duration(i) * time.Second), Type: "node_revoked", Role: "worker", NodeID: fmt.Sprintf("w%d", i)})
	}
	if gone := Evict(ops, DefaultEventMax); len(gone) != 5 || gone[0].ID != "p00000" || gone[4].ID != "p00004" {
		t.Errorf("over the cap with protected events only: evicted %v; want the 5 oldest", gone)
	}
}
