package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
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
