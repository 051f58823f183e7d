package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// nodeTable is the node table sub-model: the rows of the applied poll and
// the filter, sort and role toggles that choose and order the visible
// ones, the cursor and the vertical and horizontal scroll.
//
// The parent hands it the rows once per poll (setRows), the filter text
// the filter line holds (setFilter) and its size (setSize: the width and
// how many rows fit under the chrome, which only the parent knows). Its
// Update takes the keys of the table (sort, toggles, scrolling, moving);
// the keys that move the focus elsewhere (/, enter, esc) are the
// parent's. Every method that changes the visible rows does the per-row
// work there, so that View touches only the rows in the window.
type nodeTable struct {
	keys keyMap
	st   styles

	// viewW is the width the table is drawn at; page is how many rows fit
	// under the column header. The parent sets both (setSize).
	viewW, page int

	polled bool            // setRows has been called: a poll was applied
	rows   []row           // the poll's nodes, in poll order
	index  map[nodeKey]int // row index by node
	cellW  [numColumns]int // widest cell of each column

	// visible are indices into rows that pass the filter and toggles, in
	// display order; cursor indexes visible and offset is the first
	// visible row shown.
	visible          []int
	cursor, offset   int
	selected         nodeKey
	sortCol          column
	sortDesc         bool
	hideCoordinators bool
	hideWorkers      bool
	problemsOnly     bool
	// filter is the applied filter, a copy of the filter line's text;
	// filterWords are its lower-cased words.
	filter      string
	filterWords []string
	// hscroll is how far the table is scrolled right, in columns of
	// scrollable; 0 shows the columns that fit by priority.
	hscroll int
}

func newNodeTable(k keyMap, st styles) nodeTable {
	return nodeTable{keys: k, st: st, sortCol: colRole, viewW: defaultWidth, page: 1}
}

// Update applies one key of the table: sort, order, role and problem
// toggles, horizontal scroll, and cursor movement. Other keys change
// nothing.
func (t nodeTable) Update(msg tea.KeyPressMsg) nodeTable {
	k := t.keys
	switch {
	case key.Matches(msg, k.SortNext):
		t.setSort((t.sortCol + 1) % numColumns)
	case key.Matches(msg, k.SortPrev):
		t.setSort((t.sortCol + numColumns - 1) % numColumns)
	case key.Matches(msg, k.Order):
		t.sortDesc = !t.sortDesc
		t.reorder()
	case key.Matches(msg, k.SortBy):
		t.setSort(map[string]column{"N": colNode, "H": colHealth, "A": colAge, "V": colVersion, "R": colReqs, "B": colBytes}[msg.String()])
	case key.Matches(msg, k.Coordinators):
		t.hideCoordinators = !t.hideCoordinators
		t.reorder()
	case key.Matches(msg, k.Workers):
		t.hideWorkers = !t.hideWorkers
		t.reorder()
	case key.Matches(msg, k.Problems):
		t.problemsOnly = !t.problemsOnly
		t.reorder()
	case key.Matches(msg, k.Left):
		t.hscroll = max(t.hscroll-1, 0)
	case key.Matches(msg, k.Right):
		if t.hiddenColumns(t.viewW) > 0 || t.hscroll > 0 {
			t.hscroll = min(t.hscroll+1, len(scrollable)-1)
		}
	default:
		t.move(msg)
	}
	return t
}

// move moves the cursor.
func (t *nodeTable) move(msg tea.KeyPressMsg) {
	k, page := t.keys, max(t.page, 1)
	switch {
	case key.Matches(msg, k.Up):
		t.cursor--
	case key.Matches(msg, k.Down):
		t.cursor++
	case key.Matches(msg, k.PageUp):
		t.cursor -= page
	case key.Matches(msg, k.PageDown):
		t.cursor += page
	case key.Matches(msg, k.Top):
		t.cursor = 0
	case key.Matches(msg, k.Bottom):
		t.cursor = len(t.visible) - 1
	default:
		return
	}
	t.cursor = min(max(t.cursor, 0), max(len(t.visible)-1, 0))
	t.syncSelected()
	t.fixOffset()
}

// setSize records the table's width and how many rows fit. It does not
// scroll: the next move, reorder or fixOffset does.
func (t *nodeTable) setSize(w, page int) {
	t.viewW, t.page = w, page
}

// setRows replaces the rows with a new poll's (the page must already be
// the one the new poll is drawn with) and reorders them.
func (t *nodeTable) setRows(rows []row) {
	t.polled = true
	t.rows = rows
	t.index = make(map[nodeKey]int, len(rows))
	for i := range rows {
		t.index[rows[i].key] = i
	}
	t.cellW = cellWidths(rows)
	t.reorder()
}

// setFilter applies the filter text f.
func (t *nodeTable) setFilter(f string) {
	if f == t.filter {
		return
	}
	t.filter = f
	t.filterWords = strings.Fields(strings.ToLower(f))
	t.reorder()
}

func (t *nodeTable) setSort(c column) {
	t.sortCol, t.sortDesc = c, c.defaultDesc()
	t.reorder()
}

// reorder recomputes the visible rows after a change of poll, filter,
// sort or toggles, keeping the selected node selected when it is still
// shown.
func (t *nodeTable) reorder() {
	keep := func(r *row) bool {
		if (r.worker && t.hideWorkers) || (!r.worker && t.hideCoordinators) {
			return false
		}
		if t.problemsOnly && !r.problem() {
			return false
		}
		return len(t.filterWords) == 0 || matchFilter(r.searchText(), t.filterWords)
	}
	t.visible = order(t.rows, keep, t.sortCol, t.sortDesc)
	t.cursor = min(t.cursor, max(len(t.visible)-1, 0))
	if t.selected != (nodeKey{}) {
		if i, ok := t.index[t.selected]; ok {
			for v, ri := range t.visible {
				if ri == i {
					t.cursor = v
					break
				}
			}
		}
	}
	t.syncSelected()
	t.fixOffset()
}

// syncSelected records the node under the cursor.
func (t *nodeTable) syncSelected() {
	if t.cursor < len(t.visible) {
		t.selected = t.rows[t.visible[t.cursor]].key
	}
}

// fixOffset scrolls the table so that the cursor is on screen.
func (t *nodeTable) fixOffset() {
	n := max(t.page, 1)
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.cursor >= t.offset+n {
		t.offset = t.cursor - n + 1
	}
	t.offset = max(min(t.offset, len(t.visible)-n), 0)
}

// selection returns the selected node and its row, nil when the node is
// not in the applied poll.
func (t *nodeTable) selection() (nodeKey, *row) {
	if i, ok := t.index[t.selected]; ok {
		return t.selected, &t.rows[i]
	}
	return t.selected, nil
}

// visibleIDs returns the node IDs of the visible rows, in display order.
func (t *nodeTable) visibleIDs() []string {
	ids := make([]string, len(t.visible))
	for i, ri := range t.visible {
		ids[i] = t.rows[ri].node.NodeID
	}
	return ids
}
