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
