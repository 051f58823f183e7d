package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/talonhq/talon/internal/apiv1"
)

// press is the key message of one key name: a rune, or enter, esc,
// backspace, up, down, pgdown, left, right.
func press(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "ctrl+v":
		return tea.KeyPressMsg{Code: 'v', Mod: tea.ModCtrl}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

// fixtureTable is a node table holding fixture(0)'s rows, page rows high
// and w wide.
func fixtureTable(t *testing.T, w, page int) nodeTable {
	t.Helper()
	p := fixture(0)
	tb := newNodeTable(newKeyMap(), newStyles())
	tb.setSize(w, page)
	tb.setRows(buildRows(p.Nodes, make([]rates, len(p.Nodes)), 16_000))
	return tb
}

func TestNodeTableUpdate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		keys        []string
		wantIDs     []string // visible rows in order; nil: not checked
		wantCursor  int
		wantOffset  int
		wantSort    column
		wantDesc    bool
		wantHscroll int
	}{
		{name: "initial order is role then node", wantIDs: []string{"coord-a", "coord-b", "w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{name: "down moves the cursor and scrolls a page of 3", keys: []string{"j", "j", "j"}, wantCursor: 3, wantOffset: 1},
		{name: "up stops at the first row", keys: []string{"k", "k"}, wantCursor: 0},
		{name: "page down moves a page", keys: []string{"pgdown"}, wantCursor: 3, wantOffset: 1},
		{name: "G goes to the last row, g back", keys: []string{"G"}, wantCursor: 7, wantOffset: 5},
		{name: "g after G", keys: []string{"G", "g"}, wantCursor: 0, wantOffset: 0},
		{name: "s sorts by the next column in its default order", keys: []string{"s"}, wantSort: colNode},
		// The cursor follows coord-a, which sorts last without a value.
		{name: "S sorts by the previous column", keys: []string{"S"}, wantSort: colResident, wantDesc: true, wantCursor: 6, wantOffset: 4},
		// Ties (one role) stay by node ID ascending in either order.
		{name: "o reverses", keys: []string{"o"}, wantDesc: true, wantCursor: 6, wantOffset: 4,
			wantIDs: []string{"w-01", "w-02", "w-03", "w-04", "w-05", "w-06", "coord-a", "coord-b"}},
		{name: "shift+H sorts by health, worst first", keys: []string{"H"}, wantSort: colHealth, wantDesc: true, wantCursor: 2,
			wantIDs: []string{"w-05", "w-04", "coord-a", "coord-b", "w-01", "w-02", "w-03", "w-06"}},
		{name: "c hides coordinators", keys: []string{"c"}, wantIDs: []string{"w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{name: "w hides workers", keys: []string{"w"}, wantIDs: []string{"coord-a", "coord-b"}},
		{name: "u shows problem nodes", keys: []string{"u"}, wantIDs: []string{"w-04", "w-05", "w-06"}},
		{name: "cursor follows its node across a toggle", keys: []string{"j", "j", "j", "c"}, wantCursor: 1, wantOffset: 1,
			wantIDs: []string{"w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{name: "right scrolls when columns are hidden", keys: []string{"l", "l"}, wantHscroll: 2},
		{name: "left stops at 0", keys: []string{"l", "left", "left"}, wantHscroll: 0},
		{name: "keys of other sub-models change nothing", keys: []string{"/", "enter", "esc", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := fixtureTable(t, 80, 3)
			for _, k := range tc.keys {
				tb = tb.Update(press(k))
			}
			if tc.wantIDs != nil && !slices.Equal(tb.visibleIDs(), tc.wantIDs) {
				t.Errorf("rows %v, want %v", tb.visibleIDs(), tc.wantIDs)
			}
			if tb.cursor != tc.wantCursor || tb.offset != tc.wantOffset {
				t.Errorf("cursor %d offset %d, want %d and %d", tb.cursor, tb.offset, tc.wantCursor, tc.wantOffset)
			}
			if tb.sortCol != tc.wantSort || tb.sortDesc != tc.wantDesc {
				t.Errorf("sort %s desc %v, want %s desc %v", tb.sortCol.name(), tb.sortDesc, tc.wantSort.name(), tc.wantDesc)
			}
			if tb.hscroll != tc.wantHscroll {
				t.Errorf("hscroll %d, want %d", tb.hscroll, tc.wantHscroll)
			}
		})
	}
}

func TestNodeTableRightNeedsHiddenColumns(t *testing.T) {
	tb := fixtureTable(t, 300, 3).Update(press("l"))
	if tb.hscroll != 0 {
		t.Errorf("at 300 columns nothing is hidden, yet l scrolled to %d", tb.hscroll)
	}
}

func TestNodeTableView(t *testing.T) {
	for _, tc := range []struct {
		name    string
		table   func(t *testing.T) nodeTable
		n       int
		want    []string // lines, plain, right-trimmed
		notWant []string
	}{
		{
			name:  "window of n-1 rows with the cursor and late marks",
			table: func(t *testing.T) nodeTable { return fixtureTable(t, 60, 3).Update(press("G")) },
			n:     4,
			want: []string{
				"   ROLE ▲  NODE     HEALTH     READY  REQ/S  HIT%  BYTES/S",
				"   worker  w-04     degraded   yes        -     -        -",
				" ! worker  w-05     unhealthy  yes        -     -        -",
				">  worker  w-06     healthy    no         -     -        -",
			},
		},
		{
			name:  "window follows the offset",
			table: func(t *testing.T) nodeTable { return fixtureTable(t, 60, 3) },
			n:     3,
			want: []string{
				"   ROLE ▲  NODE     HEALTH     READY  REQ/S  HIT%  BYTES/S",
				">  coord   coord-a  healthy    yes",
				"   coord   coord-b  healthy    yes",
			},
		},
		{
			name: "no rows match",
			table: func(t *testing.T) nodeTable {
				tb := fixtureTable(t, 60, 3)
				tb.setFilter("nothing-matches")
				return tb
			},
			n:    5,
			want: []string{"   ROLE ▲  NODE     HEALTH     READY  REQ/S  HIT%  BYTES/S", "no nodes match the filter and toggles"},
		},
		{
			name:  "before the first poll",
			table: func(*testing.T) nodeTable { return newNodeTable(newKeyMap(), newStyles()) },
			n:     5,
			want:  []string{"   ROLE ▲  NODE  HEALTH  READY  REQ/S  HIT%  BYTES/S", ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := tc.table(t)
			lines := tb.View(60, tc.n, false)
			var got []string
			for _, l := range lines {
				got = append(got, strings.TrimRight(ansi.Strip(l), " "))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("view:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestNodeTableViewDoesNotGrowWithRows(t *testing.T) {
	p := bigPoll(5000, 0)
	tb := newNodeTable(newKeyMap(), newStyles())
	tb.setSize(160, 20)
	tb.setRows(buildRows(p.Nodes, make([]rates, len(p.Nodes)), 16_000))
	if got := len(tb.View(160, 21, false)); got != 21 {
		t.Errorf("View rendered %d lines, want the header and 20 rows", got)
	}
	if got := len(tb.viewAll(160, false)); got != 5001 {
		t.Errorf("viewAll rendered %d lines, want the header and 5000 rows", got)
	}
}

func TestNodeTableFaint(t *testing.T) {
	tb := fixtureTable(t, 60, 3)
	fresh, stale := tb.View(60, 3, false)[2], tb.View(60, 3, true)[2]
	if fresh == stale || ansi.Strip(fresh) != ansi.Strip(stale) {
		t.Errorf("faint should change the style only: fresh %q stale %q", fresh, stale)
	}
}

func TestFilterUpdate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		keys        []string
		wantValue   string
		wantEditing bool
		wantAction  filterAction // of the last key
	}{
		{name: "typing edits", keys: []string{"w", "-", "0"}, wantValue: "w-0", wantEditing: true},
		{name: "backspace deletes the last rune", keys: []string{"w", "é", "backspace"}, wantValue: "w", wantEditing: true},
		{name: "enter keeps the filter", keys: []string{"w", "enter"}, wantValue: "w"},
		{name: "esc clears it", keys: []string{"w", "esc"}, wantValue: ""},
		{name: "q is text", keys: []string{"q"}, wantValue: "q", wantEditing: true},
		{name: "up moves the table", keys: []string{"w", "up"}, wantValue: "w", wantEditing: true, wantAction: filterMove},
		{name: "page down moves the table", keys: []string{"pgdown"}, wantEditing: true, wantAction: filterMove},
		{name: "ctrl+v does not paste", keys: []string{"a", "ctrl+v"}, wantValue: "a", wantEditing: true},
		{name: "left moves the text cursor", keys: []string{"a", "b", "left", "x"}, wantValue: "axb", wantEditing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilter(newStyles()).focus()
			var act filterAction
			for _, k := range tc.keys {
				f, act = f.Update(press(k))
			}
			if f.value() != tc.wantValue || f.editing() != tc.wantEditing || act != tc.wantAction {
				t.Errorf("value %q editing %v action %v, want %q %v %v", f.value(), f.editing(), act, tc.wantValue, tc.wantEditing, tc.wantAction)
			}
		})
	}
	t.Run("unfocused ignores keys", func(t *testing.T) {
		f, _ := newFilter(newStyles()).Update(press("w"))
		if f.value() != "" {
			t.Errorf("value %q, want empty", f.value())
		}
	})
	t.Run("focus resumes at the end of the kept text", func(t *testing.T) {
		f := newFilter(newStyles()).focus()
		for _, k := range []string{"a", "b", "left", "enter"} {
			f, _ = f.Update(press(k))
		}
		f, _ = f.focus().Update(press("c"))
		if f.value() != "abc" {
			t.Errorf("value %q, want abc", f.value())
		}
	})
}

func TestFilterView(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		want string
	}{
		{name: "editing shows the block cursor", keys: []string{"w", "-", "0"}, want: "/w-0█ (enter keep, esc clear)"},
		{name: "the cursor where the text cursor is", keys: []string{"a", "b", "left"}, want: "/a█b (enter keep, esc clear)"},
		{name: "kept", keys: []string{"w", "enter"}, want: `filter "w" (/ edit, esc clear)`},
		{name: "cleared", keys: []string{"w", "esc"}, want: ""},
		{name: "editing an empty filter", want: "/█ (enter keep, esc clear)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilter(newStyles()).focus()
			for _, k := range tc.keys {
				f, _ = f.Update(press(k))
			}
			if got := ansi.Strip(f.View()); got != tc.want {
				t.Errorf("view %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDetailUpdate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxOffset  int
		keys       []string
		wantOffset int
		wantClosed bool
	}{
		{name: "down scrolls", maxOffset: 5, keys: []string{"j", "j"}, wantOffset: 2},
		{name: "down stops at the end", maxOffset: 1, keys: []string{"j", "j", "j"}, wantOffset: 1},
		{name: "up stops at the top", maxOffset: 5, keys: []string{"j", "k", "k"}, wantOffset: 0},
		{name: "g goes to the top", maxOffset: 5, keys: []string{"j", "j", "g"}, wantOffset: 0},
		{name: "esc closes", maxOffset: 5, keys: []string{"esc"}, wantClosed: true},
		{name: "enter closes", maxOffset: 5, keys: []string{"j", "enter"}, wantOffset: 1, wantClosed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDetail(newKeyMap(), newStyles(), time.UTC).open()
			d.maxOffset = tc.maxOffset
			var closed bool
			for _, k := range tc.keys {
				d, closed = d.Update(press(k))
			}
			if d.offset != tc.wantOffset || closed != tc.wantClosed {
				t.Errorf("offset %d closed %v, want %d %v", d.offset, closed, tc.wantOffset, tc.wantClosed)
			}
		})
	}
}

func TestDetailView(t *testing.T) {
	p := fixture(0)
	rows := buildRows(p.Nodes, make([]rates, len(p.Nodes)), 16_000)
	w05 := &rows[6]
	if w05.node.NodeID != "w-05" {
		t.Fatalf("fixture order changed: row 6 is %s", w05.node.NodeID)
	}
	for _, tc := range []struct {
		name      string
		offset    int
		r         *row
		n         int
		wantFirst string
		wantLen   int
		want      string // somewhere in the lines
	}{
		{name: "title first", r: w05, n: 30, wantFirst: "worker w-05 · esc back", wantLen: 20, want: "LATE (marked by the store, or above 16s)"},
		{name: "window of n lines", r: w05, n: 5, wantFirst: "worker w-05 · esc back", wantLen: 5, want: "incarnation   inc-w-05"},
		{name: "scrolled", offset: 2, r: w05, n: 5, wantFirst: "  cluster       prod", wantLen: 5},
		{name: "offset past the end shows the last n", offset: 99, r: w05, n: 5, wantFirst: "  requests      5000 total, 0 errors", wantLen: 5, want: "store errors  0"},
		{name: "node gone", r: nil, n: 5, wantFirst: "worker w-05 is not in the current snapshot · esc back", wantLen: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDetail(newKeyMap(), newStyles(), time.UTC)
			d.threshold, d.offset = 16*time.Second, tc.offset
			lines := d.View(120, tc.n, t0, nodeKey{role: "worker", id: "w-05"}, tc.r)
			if len(lines) != tc.wantLen {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), tc.wantLen, ansi.Strip(strings.Join(lines, "\n")))
			}
			if got := ansi.Strip(lines[0]); got != tc.wantFirst {
				t.Errorf("first line %q, want %q", got, tc.wantFirst)
			}
			if all := ansi.Strip(strings.Join(lines, "\n")); !strings.Contains(all, tc.want) {
				t.Errorf("lines lack %q:\n%s", tc.want, all)
			}
		})
	}
}

func TestEventsUpdateAndView(t *testing.T) {
	events := func(n int) []apiv1.Event {
		var out []apiv1.Event
		for i := range n {
			out = append(out, apiv1.Event{TimeUnixMs: t0.UnixMilli() + int64(i)*1000, Type: "node_registered",
				Role: "worker", NodeID: "w-" + string(rune('a'+i)), New: "healthy"})
		}
		return out
	}
	withEvents := func(n int) PollMsg {
		p := fixture(0)
		p.Events = events(n)
		return PollMsg{Seq: 1, Poll: p}
	}
	for _, tc := range []struct {
		name      string
		msgs      []tea.Msg
		h         int
		wantLines int    // title included; 0: no pane
		wantLast  string // in the last line
	}{
		{name: "newest events in a quarter of the height", msgs: []tea.Msg{withEvents(20)}, h: 40, wantLines: 10, wantLast: "w-t"},
		{name: "all of few events", msgs: []tea.Msg{withEvents(3)}, h: 60, wantLines: 4, wantLast: "w-c"},
		{name: "none below the minimum height", msgs: []tea.Msg{withEvents(3)}, h: eventsMinHeight - 1},
		{name: "none without events", msgs: []tea.Msg{withEvents(0)}, h: 60},
		{name: "a later poll replaces them", msgs: []tea.Msg{withEvents(5), withEvents(2)}, h: 60, wantLines: 3, wantLast: "w-b"},
		{name: "a poll without data and other messages change nothing",
			msgs: []tea.Msg{withEvents(2), PollMsg{Seq: 2}, clockMsg{}, press("j")}, h: 60, wantLines: 3, wantLast: "w-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEvents(newStyles(), time.UTC)
			for _, msg := range tc.msgs {
				e = e.Update(msg)
			}
			lines := e.View(160, tc.h, t0)
			if len(lines) != tc.wantLines {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), tc.wantLines, ansi.Strip(strings.Join(lines, "\n")))
			}
			if tc.wantLines == 0 {
				return
			}
			if !strings.Contains(ansi.Strip(lines[0]), "EVENTS of coord-a") {
				t.Errorf("title %q", ansi.Strip(lines[0]))
			}
			if last := ansi.Strip(lines[len(lines)-1]); !strings.Contains(last, tc.wantLast) {
				t.Errorf("last line %q lacks %q", last, tc.wantLast)
			}
		})
	}
}
