package nodetable

import (
	"slices"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

func TestSort(t *testing.T) {
	nodes := []apiv1.Node{
		{NodeID: "c", Role: "coordinator", Health: "healthy", Ready: true, HeartbeatAgeMs: 5, StartTimeUnixMs: 30},
		{NodeID: "a", Role: "worker", Health: "unhealthy", Ready: true, HeartbeatAgeMs: 1, StartTimeUnixMs: 10,
			Capacity: apiv1.Capacity{CapacityBytes: 2, ResidentBytes: 1}, Counters: apiv1.Counters{HitsTotal: 1, MissesTotal: 1}},
		{NodeID: "b", Role: "worker", Health: "degraded", Ready: false, HeartbeatAgeMs: 9, StartTimeUnixMs: 20,
			Capacity: apiv1.Capacity{CapacityBytes: 4, ResidentBytes: 0}, Counters: apiv1.Counters{HitsTotal: 9, MissesTotal: 1}},
	}
	tests := []struct {
		key  string
		want string
	}{
		{"", "c,a,b"},
		{SortName, "a,b,c"},
		{SortRole, "c,a,b"},
		{SortHealth, "c,b,a"},
		{SortReady, "c,a,b"},
		{SortAge, "a,c,b"},
		{SortUptime, "a,b,c"},
		// Quantities ascend, like kubectl (c has none: 0, and no hit
		// ratio: -1).
		{SortCapacity, "c,a,b"},
		{SortResident, "c,b,a"},
		{SortHitRatio, "c,a,b"},
		// A JSONPath over the node object, ascending; absent values first.
		{".capacity.capacityBytes", "c,a,b"},
		{"{.counters.hitsTotal}", "c,a,b"},
		{".nodeId", "a,b,c"},
		{"-.heartbeatAgeMs", "b,c,a"},
		{".labels.zone", "c,a,b"}, // absent everywhere: the API's order
		// A leading - reverses the key's order; ties keep the API's order
		// (c and a are both ready).
		{"-" + SortName, "c,b,a"},
		{"-" + SortCapacity, "b,a,c"},
		{"-" + SortHealth, "a,b,c"},
		{"-" + SortReady, "b,c,a"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			ns := slices.Clone(nodes)
			Sort(ns, tt.key)
			var ids []string
			for _, n := range ns {
				ids = append(ids, n.NodeID)
			}
			if got := strings.Join(ids, ","); got != tt.want {
				t.Errorf("sorted by %q: %s, want %s", tt.key, got, tt.want)
			}
		})
	}
	for _, k := range SortKeys {
		Sort(slices.Clone(nodes), k) // every advertised key is implemented (no panic)
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		format string
		tty    bool
		want   string
		labels []string
		show   bool
	}{
		// The same headers on a terminal and in a pipe.
		{cmdutil.OutputTable, true, "NODE|ROLE|HEALTH|READY|HEARTBEAT|VERSION|ADDRESS", nil, false},
		{cmdutil.OutputTable, false, "NODE|ROLE|HEALTH|READY|HEARTBEAT|VERSION|ADDRESS", nil, false},
		{cmdutil.OutputWide, true, "NODE|ROLE|HEALTH|READY|HEARTBEAT|VERSION|ADDRESS|INCARNATION|STARTED|CAPACITY|RESIDENT|HIT RATIO|LABELS", nil, false},
		{cmdutil.OutputWide, false, "NODE|ROLE|HEALTH|READY|HEARTBEAT|VERSION|ADDRESS|INCARNATION|STARTED|CAPACITY|RESIDENT|HIT RATIO|LABELS", nil, false},
		// -L and --show-labels.
		{cmdutil.OutputTable, false, "NODE|ROLE|HEALTH|READY|HEARTBEAT|VERSION|ADDRESS|LABELS|ZONE|TIER", []string{"zone", "tier"}, true},
		{cmdutil.OutputWide, false, "NODE|ROLE|HEALTH|READY|HEARTBEAT|VERSION|ADDRESS|INCARNATION|STARTED|CAPACITY|RESIDENT|HIT RATIO|LABELS|ZONE", []string{"zone"}, true},
	}
	for _, tt := range tests {
		p := &Printer{Format: tt.format, TTY: tt.tty, LabelColumns: tt.labels, ShowLabels: tt.show}
		if got := strings.Join(p.Headers(), "|"); got != tt.want {
			t.Errorf("%s tty=%v: %s, want %s", tt.format, tt.tty, got, tt.want)
		}
		if n := len(p.Row(&apiv1.Node{}, 0)); n != len(p.Headers()) {
			t.Errorf("%s tty=%v: %d cells for %d headers", tt.format, tt.tty, n, len(p.Headers()))
		}
	}
}

func TestCheckSortByPath(t *testing.T) {
	for _, ok := range []string{".capacity.residentBytes", "-.capacity.residentBytes", "{.labels.zone}", "name", "-hit-ratio"} {
		if err := CheckSortBy(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{".items[*].nodeId", "{.nodeId", ".", "..a", "size"} {
		if err := CheckSortBy(bad); err == nil || !strings.Contains(err.Error(), "--sort-by") {
			t.Errorf("%s: %v, want a usage error naming --sort-by", bad, err)
		}
	}
}
