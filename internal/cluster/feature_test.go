package cluster

import (
	"errors"
	"strings"
	"testing"
)

func TestSurveyRecords(t *testing.T) {
	rec := func(role Role, id, version string, level int64) *Record {
		return &Record{Role: role, NodeID: id, Version: version, FeatureLevel: level}
	}
	tests := []struct {
		name          string
		records       []*Record
		level, high   int64
		mixed         bool
		lowest        string
		versions      []string
		allowRenewals bool
	}{
		{"empty", nil, BuildLevel, BuildLevel, false, "", nil, true},
		{"all at the build's level", []*Record{rec(RoleCoordinator, "c1", "v2", BuildLevel), rec(RoleWorker, "w1", "v2", BuildLevel)}, BuildLevel, BuildLevel, false, "", []string{"v2"}, true},
		{"a previous-release coordinator", []*Record{rec(RoleCoordinator, "c2", "v2", 1), rec(RoleCoordinator, "c1", "v1", 0), rec(RoleWorker, "w1", "v2", 1)},
			0, 1, true, "coordinator/c1", []string{"v1", "v2"}, false},
		{"previous-release workers", []*Record{rec(RoleCoordinator, "c1", "v2", 1), rec(RoleWorker, "w2", "v1", 0), rec(RoleWorker, "w1", "v1", 0)},
			0, 1, true, "worker/w1", []string{"v1", "v2"}, false},
		{"same level, two versions (a patch release)", []*Record{rec(RoleWorker, "w1", "v2.0.1", BuildLevel), rec(RoleWorker, "w2", "v2.0.0", BuildLevel)}, BuildLevel, BuildLevel, true, "", []string{"v2.0.0", "v2.0.1"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := SurveyRecords(tc.records)
			if s.Level != tc.level || s.Highest != tc.high || s.Mixed() != tc.mixed || s.Lowest != tc.lowest || s.Allows(LevelRenewals) != tc.allowRenewals {
				t.Fatalf("survey %+v: level %d highest %d mixed %v lowest %q renewals %v; want %d %d %v %q %v",
					s, s.Level, s.Highest, s.Mixed(), s.Lowest, s.Allows(LevelRenewals), tc.level, tc.high, tc.mixed, tc.lowest, tc.allowRenewals)
			}
			if got := strings.Join(s.DistinctVersions(), ","); got != strings.Join(tc.versions, ",") {
				t.Fatalf("versions %q; want %q", got, strings.Join(tc.versions, ","))
			}
			// The same records in another order survey alike.
			rev := make([]*Record, len(tc.records))
			for i, r := range tc.records {
				rev[len(rev)-1-i] = r
			}
			if r := SurveyRecords(rev); r.Level != s.Level || r.Lowest != s.Lowest || len(r.Versions) != len(s.Versions) {
				t.Fatalf("order changed the survey: %+v vs %+v", r, s)
			}
		})
	}
}

func TestCheckSkew(t *testing.T) {
	for _, tc := range []struct {
		peer, own int64
		ok        bool
	}{{0, 1, true}, {1, 1, true}, {2, 1, true}, {3, 1, false}, {0, 2, false}, {1, 2, true}, {0, 0, true}, {1, 0, true}, {2, 0, false}} {
		err := CheckSkew(&Record{Role: RoleWorker, NodeID: "w1", Version: "v-peer", FeatureLevel: tc.peer}, RoleCoordinator, "c1", "v-own", tc.own)
		if (err == nil) != tc.ok {
			t.Errorf("peer %d beside own %d: %v; want ok %v", tc.peer, tc.own, err, tc.ok)
		}
		var se *SkewError
		if err != nil && (!errors.As(err, &se) || !strings.Contains(err.Error(), "v-peer") || !strings.Contains(err.Error(), "v-own")) {
			t.Errorf("skew error %v does not name both versions", err)
		}
	}
}

func TestFeatureLevelValidated(t *testing.T) {
	r := validRecord()
	r.FeatureLevel = -1
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "featureLevel") {
		t.Fatalf("featureLevel -1: %v", err)
	}
	r.FeatureLevel = MaxFeatureLevel + 1
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "featureLevel") {
		t.Fatalf("featureLevel past the bound: %v", err)
	}
}
