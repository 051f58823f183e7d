package state

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestEventReasonBound: ValidateEvent refuses a reason over
// MaxEventReason bytes or of invalid UTF-8, and CutEventReason makes any
// reason one it takes, cut on a rune with an ellipsis.
func TestEventReasonBound(t *testing.T) {
	ev := NodeEvent{ID: strings.Repeat("a", 32), ClusterID: "c", Time: time.Unix(1, 0), Type: "node_joined"}
	for _, tc := range []struct {
		reason string
		cut    bool
	}{
		{"", false},
		{strings.Repeat("x", MaxEventReason), false},
		{strings.Repeat("x", MaxEventReason+1), true},
		{strings.Repeat("é", MaxEventReason), true}, // 2 bytes a rune
		{"bad \xff byte", true},
	} {
		ev.Reason = tc.reason
		if err := ValidateEvent(ev); (err != nil) != tc.cut {
			t.Errorf("ValidateEvent(reason of %d bytes) = %v; want refused %v", len(tc.reason), err, tc.cut)
		}
		got := CutEventReason(tc.reason)
		ev.Reason = got
		if err := ValidateEvent(ev); err != nil || !utf8.ValidString(got) {
			t.Errorf("CutEventReason(%d bytes) = %d bytes that ValidateEvent refuses: %v", len(tc.reason), len(got), err)
		}
		if cut := got != tc.reason; cut != tc.cut || (cut && !strings.HasSuffix(got, "…")) {
			t.Errorf("CutEventReason(%d bytes) = %q (cut %v); want cut %v with an ellipsis", len(tc.reason), got, cut, tc.cut)
		}
	}
}
