package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

func TestEvidence(t *testing.T) {
	tm := cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 4 * time.Second, LeaseTTL: 8 * time.Second}
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	rec := func(seq uint64, late bool) []*cluster.Record {
		return []*cluster.Record{{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w1", IncarnationID: "i1", HeartbeatSeq: seq, Late: late}}
	}
	due := func(ps []proposal) string {
		if len(ps) == 0 {
			return "-"
		}
		return fmt.Sprintf("%s@%d", ps[0].transition, ps[0].seq)
	}
	type step struct {
		at   time.Duration
		recs []*cluster.Record
		gap  bool // interrupt before this read
		want string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a silent record turns late, then expires", []step{
			{0, rec(1, false), false, "-"},
			{3900 * time.Millisecond, rec(1, false), false, "-"},
			{4 * time.Second, rec(1, false), false, "late@1"},
			{4500 * time.Millisecond, rec(1, false), false, "-"}, // proposed a moment ago
			{5 * time.Second, rec(1, true), false, "-"},          // the store marked it
			{8 * time.Second, rec(1, true), false, "expire@1"},
		}},
		{"a heartbeat starts the age again", []step{
			{0, rec(1, false), false, "-"},
			{3 * time.Second, rec(2, false), false, "-"},
			{6900 * time.Millisecond, rec(2, false), false, "-"},
			{7 * time.Second, rec(2, false), false, "late@2"},
		}},
		{"unobserved time does not count", []step{
			{0, rec(1, false), false, "-"},
			{3 * time.Second, rec(1, false), false, "-"},
			// 20 s not observing (a stall, an outage): the version is old,
			// but only time observed since counts.
			{23 * time.Second, rec(1, false), true, "-"},
			{26900 * time.Millisecond, rec(1, false), false, "-"},
			{27 * time.Second, rec(1, false), false, "late@1"},
		}},
		{"a proposal is repeated after an interval while the version stays", []step{
			{0, rec(1, false), false, "-"},
			{4 * time.Second, rec(1, false), false, "late@1"},
			{5 * time.Second, rec(1, false), false, "late@1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEvidence(tm)
			for i, s := range tt.steps {
				if s.gap {
					e.interrupt()
				}
				if got := due(e.observe(s.recs, at(s.at))); got != s.want {
					t.Fatalf("step %d at %s: due %s, want %s", i, s.at, got, s.want)
				}
			}
		})
	}
	t.Run("nothing before an interval of observation", func(t *testing.T) {
		e := newEvidence(tm)
		e.interrupt()
		// A record seen for the first time counts from now; even one
		// whose threshold would pass is not proposed within an interval.
		if got := e.observe(rec(1, false), at(0)); len(got) != 0 {
			t.Fatalf("proposed %v on the first read", got)
		}
		if got := due(e.observe(rec(1, false), at(9*time.Second))); got != "expire@1" {
			t.Fatalf("after 9 s observed: %s, want expire", got)
		}
	})
}

// TestEvidenceThrottled: reads that start within observeEvery of the last
// observed one are not observed (no pass over the records, no proposal),
// the first read after that is, and so is the first after an interrupt.
func TestEvidenceThrottled(t *testing.T) {
	tm := cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 4 * time.Second, LeaseTTL: 8 * time.Second}
	e := newEvidence(tm)
	if got := e.observeEvery(); got != 50*time.Millisecond {
		t.Fatalf("observeEvery = %s, want 50ms (a tenth of 1s, capped)", got)
	}
	t0 := time.Unix(1_800_000_000, 0)
	r1 := []*cluster.Record{{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w1", IncarnationID: "i1", HeartbeatSeq: 1}}
	r2 := []*cluster.Record{{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w1", IncarnationID: "i1", HeartbeatSeq: 2}}
	e.observeThrottled(r1, t0)
	if ps := e.observeThrottled(r1, t0.Add(4*time.Second)); len(ps) != 1 {
		t.Fatalf("4 s later: %v, want the late proposal", ps)
	}
	// A new version read 10 ms later is not observed: seq 1 is still the
	// version seen, first seen at t0.
	e.observeThrottled(r2, t0.Add(4*time.Second+10*time.Millisecond))
	if v := e.versions[r1[0].Key()]; v.seq != 1 {
		t.Fatalf("a read within observeEvery was observed: version %+v", v)
	}
	e.observeThrottled(r2, t0.Add(4*time.Second+60*time.Millisecond))
	if v := e.versions[r1[0].Key()]; v.seq != 2 || !v.firstSeen.Equal(t0.Add(4*time.Second+60*time.Millisecond)) {
		t.Fatalf("the read after observeEvery was not observed: version %+v", v)
	}
	e.interrupt()
	e.observeThrottled(r1, t0.Add(4*time.Second+61*time.Millisecond))
	if v := e.versions[r1[0].Key()]; v.seq != 1 {
		t.Fatalf("the first read after an interrupt was not observed: version %+v", v)
	}
}

// TestEvidenceRenewalsForPeers: renewals this coordinator accepted are
// handed out once for its peers, and a peer's renewal raises the heard
// time of the incarnation it names only: never an older time, never
// another incarnation's record.
func TestEvidenceRenewalsForPeers(t *testing.T) {
	tm := cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 4 * time.Second, LeaseTTL: 8 * time.Second}
	e := newEvidence(tm)
	e.heard(cluster.Key{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w1"}, "i1", 500)
	if own := e.takeOwn(); own != nil {
		t.Fatalf("without a renewal log, takeOwn = %+v; want nothing kept", own)
	}
	e.shareRenewals()
	t0 := time.Unix(1_800_000_000, 0)
	recs := []*cluster.Record{
		{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w1", IncarnationID: "i1", HeartbeatSeq: 1},
		{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w2", IncarnationID: "i2", HeartbeatSeq: 1},
	}
	e.observe(recs, t0)
	e.heard(recs[0].Key(), "i1", 1000)
	e.heard(recs[0].Key(), "i1", 2000)
	own := e.takeOwn()
	if len(own) != 1 || own[0].NodeID != "w1" || own[0].AtUnixMs != 2000 || own[0].Incarnation != state.IncarnationTag("i1") {
		t.Fatalf("takeOwn = %+v; want w1's latest renewal, 2000, tagged i1", own)
	}
	if again := e.takeOwn(); again != nil {
		t.Fatalf("takeOwn twice = %+v; want nothing new", again)
	}
	applied := e.learn("c", []state.Renewal{
		{Role: cluster.RoleWorker, NodeID: "w2", Incarnation: state.IncarnationTag("i2"), AtUnixMs: 5000},
		{Role: cluster.RoleWorker, NodeID: "w1", Incarnation: state.IncarnationTag("i1"), AtUnixMs: 1500},  // older than heard
		{Role: cluster.RoleWorker, NodeID: "w2", Incarnation: state.IncarnationTag("old"), AtUnixMs: 9000}, // another incarnation
		{Role: cluster.RoleWorker, NodeID: "w9", Incarnation: state.IncarnationTag("i9"), AtUnixMs: 9000},  // not listed
	})
	if applied != 1 || e.heardAt(recs[1].Key(), "i2") != 5000 || e.heardAt(recs[0].Key(), "i1") != 2000 {
		t.Fatalf("learn applied %d; heard w1 %d, w2 %d; want 1 applied, w1 2000, w2 5000", applied, e.heardAt(recs[0].Key(), "i1"), e.heardAt(recs[1].Key(), "i2"))
	}
	if own := e.takeOwn(); own != nil {
		t.Fatalf("a peer's renewals were handed out as this coordinator's: %+v", own)
	}
}
