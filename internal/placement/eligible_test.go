package placement

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

func TestEligible(t *testing.T) {
	const now = int64(1_800_000_000_000)
	ago := func(d time.Duration) int64 { return now - d.Milliseconds() }
	rec := func(id string, role cluster.Role, health cluster.Health, ready bool, updated int64) *cluster.Record {
		return &cluster.Record{
			ClusterID: "c1", NodeID: id, Role: role, IncarnationID: "inc-" + id,
			Address: id + ".example:7070", Health: health, Ready: ready, UpdatedAtUnixMs: updated,
		}
	}
	late := func(r *cluster.Record) *cluster.Record { r.Late = true; return r }
	// cordon sets the store's mark (marked) and the reason the worker
	// reports when not ready (reporting: "cordoned", else draining).
	cordon := func(r *cluster.Record, marked, reporting bool) *cluster.Record {
		if marked {
			r.CordonedBy = "ops"
		}
		if !r.Ready {
			r.NotReadyReason = "draining: shutting down"
			if reporting {
				r.NotReadyReason = cluster.NotReadyCordoned
			}
		}
		return r
	}
	revoke := func(r *cluster.Record) *cluster.Record {
		r.RevokedBy, r.RevokedReason = "coord-a", "serial:1f"
		return r
	}
	type want struct {
		eligible bool
		reason   Reason
		health   cluster.Health
	}
	tests := []struct {
		name string
		rec  *cluster.Record
		want want
	}{
		{"healthy ready fresh", rec("w-healthy", cluster.RoleWorker, cluster.HealthHealthy, true, ago(time.Second)), want{eligible: true}},
		{"degraded is eligible", rec("w-degraded", cluster.RoleWorker, cluster.HealthDegraded, true, ago(time.Second)), want{eligible: true}},
		{"old update without a late mark: no clock decides", rec("w-old-unmarked", cluster.RoleWorker, cluster.HealthHealthy, true, ago(time.Hour)), want{eligible: true}},
		{"clock skew: update in the future", rec("w-future", cluster.RoleWorker, cluster.HealthHealthy, true, now+2000), want{eligible: true}},
		{"reported unhealthy", rec("w-sick", cluster.RoleWorker, cluster.HealthUnhealthy, true, ago(time.Second)), want{reason: ReasonUnhealthy, health: cluster.HealthUnhealthy}},
		{"reported unknown", rec("w-unknown", cluster.RoleWorker, cluster.HealthUnknown, true, ago(time.Second)), want{reason: ReasonUnhealthy, health: cluster.HealthUnknown}},
		{"health value this build does not know", rec("w-strange", cluster.RoleWorker, "recovering", true, ago(time.Second)), want{reason: ReasonUnhealthy, health: "recovering"}},
		{"marked late by the store", late(rec("w-late", cluster.RoleWorker, cluster.HealthHealthy, true, ago(15*time.Second))), want{reason: ReasonUnhealthy, health: cluster.HealthUnhealthy}},
		{"marked late, degraded", late(rec("w-late-degraded", cluster.RoleWorker, cluster.HealthDegraded, true, ago(29*time.Second))), want{reason: ReasonUnhealthy, health: cluster.HealthUnhealthy}},
		{"not ready", rec("w-draining", cluster.RoleWorker, cluster.HealthHealthy, false, ago(time.Second)), want{reason: ReasonNotReady, health: cluster.HealthHealthy}},
		{"degraded not ready", rec("w-degraded-draining", cluster.RoleWorker, cluster.HealthDegraded, false, ago(time.Second)), want{reason: ReasonNotReady, health: cluster.HealthDegraded}},
		{"unhealthy beats not ready", rec("w-sick-draining", cluster.RoleWorker, cluster.HealthUnhealthy, false, ago(time.Second)), want{reason: ReasonUnhealthy, health: cluster.HealthUnhealthy}},
		{"late beats not ready", late(rec("w-late-draining", cluster.RoleWorker, cluster.HealthHealthy, false, ago(20*time.Second))), want{reason: ReasonUnhealthy, health: cluster.HealthUnhealthy}},
		{"late and unknown, not ready", late(rec("w-late-sick", cluster.RoleWorker, cluster.HealthUnknown, false, ago(time.Hour))), want{reason: ReasonUnhealthy, health: cluster.HealthUnhealthy}},
		{"cordoned by the store, still ready", cordon(rec("w-cordoned", cluster.RoleWorker, cluster.HealthHealthy, true, ago(time.Second)), true, true), want{reason: ReasonCordoned, health: cluster.HealthHealthy}},
		{"cordoned, reporting it", cordon(rec("w-cordoned-2", cluster.RoleWorker, cluster.HealthHealthy, false, ago(time.Second)), true, true), want{reason: ReasonCordoned, health: cluster.HealthHealthy}},
		{"uncordoned, still reporting the cordon", cordon(rec("w-uncordoned", cluster.RoleWorker, cluster.HealthHealthy, false, ago(time.Second)), false, true), want{eligible: true}},
		{"not ready for another reason, no cordon", cordon(rec("w-other", cluster.RoleWorker, cluster.HealthHealthy, false, ago(time.Second)), false, false), want{reason: ReasonNotReady, health: cluster.HealthHealthy}},
		{"revoked beats everything", revoke(rec("w-revoked", cluster.RoleWorker, cluster.HealthHealthy, true, ago(time.Second))), want{reason: ReasonRevoked, health: cluster.HealthHealthy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eligible, excluded := Eligible([]*cluster.Record{tt.rec})
			if tt.want.eligible {
				want := []Node{{ID: tt.rec.NodeID, Address: tt.rec.Address, Role: cluster.RoleWorker}}
				if !slices.Equal(eligible, want) || len(excluded) != 0 {
					t.Fatalf("Eligible = %v, excluded %v; want eligible %v", eligible, excluded, want)
				}
				return
			}
			want := []Exclusion{{NodeID: tt.rec.NodeID, Reason: tt.want.reason, Health: tt.want.health}}
			if len(eligible) != 0 || !slices.Equal(excluded, want) {
				t.Fatalf("Eligible = %v, excluded %v; want excluded %v", eligible, excluded, want)
			}
		})
	}

	t.Run("all together, sorted, coordinators and nil skipped", func(t *testing.T) {
		var recs []*cluster.Record
		var wantEligible []Node
		var wantExcluded []Exclusion
		for _, tt := range tests {
			recs = append(recs, tt.rec)
			if tt.want.eligible {
				wantEligible = append(wantEligible, Node{ID: tt.rec.NodeID, Address: tt.rec.Address, Role: cluster.RoleWorker})
			} else {
				wantExcluded = append(wantExcluded, Exclusion{NodeID: tt.rec.NodeID, Reason: tt.want.reason, Health: tt.want.health})
			}
		}
		recs = append(recs, nil,
			rec("c-healthy", cluster.RoleCoordinator, cluster.HealthHealthy, true, ago(time.Second)),
			rec("c-expired", cluster.RoleCoordinator, cluster.HealthHealthy, true, ago(time.Hour)))
		slices.SortFunc(wantEligible, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
		slices.SortFunc(wantExcluded, func(a, b Exclusion) int { return strings.Compare(a.NodeID, b.NodeID) })
		for i := 0; i < 2; i++ {
			slices.Reverse(recs) // both input orders give one output
			eligible, excluded := Eligible(recs)
			if !slices.Equal(eligible, wantEligible) {
				t.Errorf("eligible = %v, want %v", eligible, wantEligible)
			}
			if !slices.Equal(excluded, wantExcluded) {
				t.Errorf("excluded = %v, want %v", excluded, wantExcluded)
			}
		}
	})

	t.Run("same records, same answer, whatever the age", func(t *testing.T) {
		// Eligibility reads no clock: records read at one revision give
		// one answer, however long ago a reader first saw them.
		a := []*cluster.Record{rec("w-a", cluster.RoleWorker, cluster.HealthHealthy, true, ago(2*time.Second))}
		b := []*cluster.Record{rec("w-a", cluster.RoleWorker, cluster.HealthHealthy, true, ago(time.Hour))}
		ea, _ := Eligible(a)
		eb, _ := Eligible(b)
		if !slices.Equal(ea, eb) || len(ea) != 1 {
			t.Fatalf("eligible %v and %v for the same record seen at different ages", ea, eb)
		}
	})

	t.Run("feeds New", func(t *testing.T) {
		var recs []*cluster.Record
		for _, tt := range tests {
			recs = append(recs, tt.rec)
		}
		eligible, _ := Eligible(recs)
		tbl := mustNew(t, eligible)
		if tbl.Len() != 5 || tbl.Version() == EmptyVersion {
			t.Fatalf("table of %d nodes, version %v; want the 5 eligible workers", tbl.Len(), tbl.Version())
		}
	})
}
