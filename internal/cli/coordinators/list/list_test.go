package list

import (
	"slices"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// TestStoreAlarmShown: a store alarm takes the STORE column and its words
// join the reasons once, whether or not /readyz already gave them.
func TestStoreAlarmShown(t *testing.T) {
	full := apiv1.StoreAlarm{Alarm: "NOSPACE", Message: "the state store's database is full (etcd alarm NOSPACE): compact, defragment, then disarm the alarm"}
	cs := &cmdutil.ColorScheme{}
	for _, tc := range []struct {
		name    string
		row     Row
		store   string
		reasons []string
	}{
		{"healthy", Row{StoreHealthy: true, Reasons: []string{}}, "healthy", []string{}},
		{"failing", Row{Reasons: []string{"store unreachable: x"}}, "failing", []string{"store unreachable: x"}},
		{"alarm, reasons hidden", Row{StoreHealthy: true, StoreAlarms: []apiv1.StoreAlarm{full}, Reasons: []string{"not ready (the reasons need a token)"}},
			"alarm NOSPACE", []string{"not ready (the reasons need a token)", full.Message}},
		{"alarm, already a reason", Row{StoreAlarms: []apiv1.StoreAlarm{full}, Reasons: []string{full.Message}}, "alarm NOSPACE", []string{full.Message}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := storeWord(cs, tc.row); got != tc.store {
				t.Errorf("STORE %q, want %q", got, tc.store)
			}
			if got := withAlarms(tc.row.Reasons, tc.row.StoreAlarms); !slices.Equal(got, tc.reasons) {
				t.Errorf("reasons %q, want %q", got, tc.reasons)
			}
		})
	}
}

// TestUpgradeNote: the line on stderr that says the cluster is mid-upgrade,
// from one coordinator of HEAD and one before feature levels (no survey).
func TestUpgradeNote(t *testing.T) {
	mixed := &apiv1.Upgrade{FeatureLevel: 0, HighestLevel: 1, ServerLevel: 1, Mixed: true, Versions: []apiv1.VersionCount{
		{Role: "coordinator", Version: "c17bbb4", FeatureLevel: 0, Count: 1}, {Role: "coordinator", Version: "v2", FeatureLevel: 1, Count: 1},
		{Role: "worker", Version: "v2", FeatureLevel: 1, Count: 3}}}
	one := &apiv1.Upgrade{FeatureLevel: 1, HighestLevel: 1, ServerLevel: 1, Versions: []apiv1.VersionCount{{Role: "worker", Version: "v2", FeatureLevel: 1, Count: 3}}}
	for _, tc := range []struct {
		name string
		rows []Row
		want string
	}{
		{"one build", []Row{{Reachable: true, Revision: "1", Version: "v2", FeatureLevel: 1, Upgrade: one}}, ""},
		{"mixed", []Row{{Reachable: true, Revision: "1", Version: "v2", FeatureLevel: 1, Upgrade: mixed}, {Reachable: true, Revision: "1", Version: "c17bbb4"}},
			"the cluster is mid-upgrade: coordinator 1 at c17bbb4 (level 0), coordinator 1 at v2 (level 1), workers 3 at v2 (level 1); cluster feature level 0 (talonctl version lists every process)"},
		{"coordinators only before feature levels", []Row{{Reachable: true, Revision: "1", Version: "v1"}, {Reachable: true, Revision: "1", Version: "v0"}},
			"the coordinators run 2 build versions: the cluster is mid-upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := upgradeNote(tc.rows); got != tc.want {
				t.Errorf("note %q\nwant %q", got, tc.want)
			}
		})
	}
}
