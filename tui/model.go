package tui

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/talonhq/talon/internal/apiv1"
)

// Defaults and limits of Options.
const (
	// DefaultRefresh is the interval between fetches while the API answers.
	DefaultRefresh = 2 * time.Second
	// MinRefresh is the shortest refresh interval New accepts.
	MinRefresh = 500 * time.Millisecond
	// DefaultUnhealthyAfter is the heartbeat age above which a row is
	// marked late when the poll does not carry the cluster's
	// unhealthy-after timing.
	DefaultUnhealthyAfter = 15 * time.Second
)

// Default terminal size before the first tea.WindowSizeMsg.
const (
	defaultWidth  = 120
	defaultHeight = 40
)

// Options configures a Model. Only Fetch is needed in production; the rest
// have defaults.
type Options struct {
	// Fetch starts a fetch (see FetchFunc). Nil: the model never fetches
	// and data arrives only through messages sent to the program (tests).
	Fetch FetchFunc
	// Refresh is the interval between fetches; default DefaultRefresh, at
	// least MinRefresh.
	Refresh time.Duration
	// Backoff is the retry schedule while fetches fail; its Initial
	// defaults to Refresh.
	Backoff Backoff
	// UnhealthyAfter is the late-heartbeat threshold used when a poll
	// does not carry Timing.UnhealthyAfterMs; default DefaultUnhealthyAfter.
	UnhealthyAfter time.Duration
	// Now is the clock; default time.Now. Tests fix it for golden output.
	Now func() time.Time
	// Location is the time zone of clock times shown; default time.Local.
	Location *time.Location
	// Jitter returns a uniform value in [0, 1) for the backoff jitter;
	// default math/rand/v2.Float64.
	Jitter func() float64
	// Done, when closed, makes pending timers return at once so that no
	// goroutine outlives the program. Nil: timers run to completion.
	Done <-chan struct{}
}

// ErrInvalidOptions is wrapped by New's errors.
var ErrInvalidOptions = errors.New("invalid tui options")

// Model is the `talonctl top` view. Create it with New; it implements
// tea.Model with a pointer receiver.
type Model struct {
	opts    Options
	backoff Backoff
	st      styles
	keys    keyMap
	help    help.Model

	width, height int

	// Fetch ordering: seq is the newest fetch issued (or response seen),
	// applied the newest response applied; timerGen identifies the one
	// live refresh timer.
	seq, applied, timerGen uint64

	poll       *Poll
	receivedAt time.Time // local clock when poll was applied
	err        error     // error of the newest response; nil after a success
	failures   int       // consecutive failed fetches
	failingAt  time.Time // when the first of them was applied
	nextAt     time.Time // when the pending timer fires; zero when none

	tracker   rateTracker
	rows      []row
	index     map[nodeKey]int // row index by node
	cellW     [numColumns]int // widest cell of each column
	lateCount int
	threshold time.Duration // late threshold of the current poll
	// coords are the indices in poll.Nodes of the coordinators, in poll
	// order: the coordinators pane reads them every frame, which must not
	// scan every node.
	coords []int

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
	filter           string
	filterWords      []string
	filtering        bool

	detail       bool
	detailOffset int
	// view is the body shown: the node table, the events or the
	// coordinators (k9s-style :view); commanding/command edit it.
	view       bodyView
	commanding bool
	command    string
	// hscroll is how far the table is scrolled right, in columns of
	// scrollable; 0 shows the columns that fit by priority.
	hscroll int
}

// New returns a model with opts.
func New(opts Options) (*Model, error) {
	if opts.Refresh == 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Refresh < MinRefresh {
		return nil, fmt.Errorf("%w: refresh %s: must be at least %s", ErrInvalidOptions, opts.Refresh, MinRefresh)
	}
	if opts.UnhealthyAfter < 0 {
		return nil, fmt.Errorf("%w: unhealthy-after %s: must not be negative", ErrInvalidOptions, opts.UnhealthyAfter)
	}
	if opts.UnhealthyAfter == 0 {
		opts.UnhealthyAfter = DefaultUnhealthyAfter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	m := &Model{
		opts:    opts,
		backoff: opts.Backoff.withDefaults(opts.Refresh),
		st:      newStyles(),
		keys:    newKeyMap(),
		sortCol: colRole,
	}
	m.help = m.st.help()
	m.threshold = opts.UnhealthyAfter
	return m, nil
}

// Init starts the first fetch and the clock that redraws relative times.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.fetch(), after(m.opts.Done, clockInterval, clockMsg{}))
}

// Update applies one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
		m.keys.width = msg.Width
		m.fixOffset()
		return m, nil
	case PollMsg:
		return m, m.applyPoll(msg)
	case FetchErrorMsg:
		return m, m.applyError(msg)
	case refreshMsg:
		if msg.gen != m.timerGen {
			return m, nil // superseded
		}
		return m, m.fetch()
	case clockMsg:
		return m, after(m.opts.Done, clockInterval, clockMsg{})
	case tea.KeyPressMsg:
		return m.handleKey(msg)
	}
	return m, nil
}

// fetch issues the next fetch and cancels the pending timer: the response
// schedules the next one.
func (m *Model) fetch() tea.Cmd {
	if m.opts.Fetch == nil {
		return nil
	}
	m.timerGen++
	m.nextAt = time.Time{}
	m.seq++
	return m.opts.Fetch(m.seq)
}

// schedule arms the refresh timer for d from now, superseding any other.
func (m *Model) schedule(d time.Duration) tea.Cmd {
	m.timerGen++
	m.nextAt = m.opts.Now().Add(d)
	return after(m.opts.Done, d, refreshMsg{gen: m.timerGen})
}

func (m *Model) applyPoll(msg PollMsg) tea.Cmd {
	if msg.Seq <= m.applied || msg.Poll == nil {
		return nil // older than what is shown, or nothing
	}
	m.applied = msg.Seq
	m.poll = msg.Poll
	m.receivedAt = m.opts.Now()
	m.err, m.failures, m.failingAt = nil, 0, time.Time{}
	m.rebuild()
	if msg.Seq < m.seq {
		return nil // a newer fetch is in flight; its response schedules
	}
	m.seq = msg.Seq
	return m.schedule(m.opts.Refresh)
}

func (m *Model) applyError(msg FetchErrorMsg) tea.Cmd {
	if msg.Seq <= m.applied {
		return nil
	}
	m.applied = msg.Seq
	if msg.Err == nil {
		msg.Err = errors.New("fetch failed without an error")
	}
	m.err = msg.Err
	if m.failures == 0 {
		m.failingAt = m.opts.Now()
	}
	m.failures++
	d := m.backoff.Delay(m.failures, m.opts.Jitter())
	if ae, ok := errors.AsType[*apiv1.APIError](msg.Err); ok && ae.RetryAfter > d {
		d = min(ae.RetryAfter, m.backoff.Max)
	}
	m.fixOffset() // the banner takes rows
	if msg.Seq < m.seq {
		return nil
	}
	m.seq = msg.Seq
	return m.schedule(d)
}

// rebuild recomputes everything derived from the poll.
func (m *Model) rebuild() {
	m.threshold = m.opts.UnhealthyAfter
	if ms := m.poll.Cluster.Timing.UnhealthyAfterMs; ms > 0 {
		m.threshold = time.Duration(ms) * time.Millisecond
	}
	// A heartbeat that only renewed the lease through another
	// coordinator is known to the answering one within about
	// unhealthy-after on etcd (heartbeatAtUnixMs), so an age is late only
	// a heartbeat interval past it.
	m.threshold += time.Duration(m.poll.Cluster.Timing.HeartbeatIntervalMs) * time.Millisecond
	rs := m.tracker.observe(m.poll.Nodes)
	m.rows = buildRows(m.poll.Nodes, rs, m.threshold.Milliseconds())
	m.index = make(map[nodeKey]int, len(m.rows))
	m.lateCount = 0
	for i := range m.rows {
		m.index[m.rows[i].key] = i
		if m.rows[i].late {
			m.lateCount++
		}
	}
	m.cellW = cellWidths(m.rows)
	m.coords = m.coords[:0]
	for i := range m.poll.Nodes {
		if m.poll.Nodes[i].Role == "coordinator" {
			m.coords = append(m.coords, i)
		}
	}
	m.reorder()
}

// reorder recomputes the visible rows after a change of poll, filter,
// sort or toggles, keeping the selected node selected when it is still
// shown.
func (m *Model) reorder() {
	keep := func(r *row) bool {
		if (r.worker && m.hideWorkers) || (!r.worker && m.hideCoordinators) {
			return false
		}
		if m.problemsOnly && !r.problem() {
			return false
		}
		return matchFilter(r.search, m.filterWords)
	}
	m.visible = order(m.rows, keep, m.sortCol, m.sortDesc)
	m.cursor = min(m.cursor, max(len(m.visible)-1, 0))
	if m.selected != (nodeKey{}) {
		if i, ok := m.index[m.selected]; ok {
			for v, ri := range m.visible {
				if ri == i {
					m.cursor = v
					break
				}
			}
		}
	}
	m.syncSelected()
	m.fixOffset()
}

// syncSelected records the node under the cursor.
func (m *Model) syncSelected() {
	if m.cursor < len(m.visible) {
		m.selected = m.rows[m.visible[m.cursor]].key
	}
}

func (m *Model) handleKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if msg.String() == "ctrl+c" {
		return m, tea.Quit
	}
	if m.filtering {
		m.editFilter(msg)
		return m, nil
	}
	if m.commanding {
		m.editCommand(msg)
		return m, nil
	}
	k := m.keys
	switch {
	case m.help.ShowAll && (key.Matches(msg, k.Back) || key.Matches(msg, k.Quit)):
		// Esc or q closes the help first, as in less or k9s; ctrl+c quits.
		m.help.ShowAll = false
		m.fixOffset()
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
		m.fixOffset()
	case key.Matches(msg, k.Refresh):
		return m, m.fetch()
	case key.Matches(msg, k.Command):
		m.commanding, m.command = true, ""
	case m.view != viewNodes:
		if key.Matches(msg, k.Back) {
			m.view = viewNodes
		}
	case m.detail:
		m.detailKey(msg)
	default:
		m.tableKey(msg)
	}
	return m, nil
}

// tableKey handles a key of the table view other than those handleKey
// takes in every view: filter, sort, role toggles, scrolling and moving.
func (m *Model) tableKey(msg tea.KeyPressMsg) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Filter):
		m.filtering = true
	case key.Matches(msg, k.Back):
		m.setFilter("")
	case key.Matches(msg, k.SortNext):
		m.setSort((m.sortCol + 1) % numColumns)
	case key.Matches(msg, k.SortPrev):
		m.setSort((m.sortCol + numColumns - 1) % numColumns)
	case key.Matches(msg, k.Order):
		m.sortDesc = !m.sortDesc
		m.reorder()
	case key.Matches(msg, k.SortBy):
		m.setSort(map[string]column{"N": colNode, "H": colHealth, "A": colAge, "V": colVersion, "R": colReqs, "B": colBytes}[msg.String()])
	case key.Matches(msg, k.Coordinators):
		m.hideCoordinators = !m.hideCoordinators
		m.reorder()
	case key.Matches(msg, k.Workers):
		m.hideWorkers = !m.hideWorkers
		m.reorder()
	case key.Matches(msg, k.Problems):
		m.problemsOnly = !m.problemsOnly
		m.reorder()
	case key.Matches(msg, k.Left):
		m.hscroll = max(m.hscroll-1, 0)
	case key.Matches(msg, k.Right):
		if w, _ := m.size(); m.hiddenColumns(w) > 0 || m.hscroll > 0 {
			m.hscroll = min(m.hscroll+1, len(scrollable)-1)
		}
	case key.Matches(msg, k.Detail):
		if len(m.visible) > 0 {
			m.detail, m.detailOffset = true, 0
		}
	default:
		m.moveKey(msg)
	}
}

// moveKey moves the cursor.
func (m *Model) moveKey(msg tea.KeyPressMsg) {
	k, page := m.keys, max(m.tableRows(), 1)
	switch {
	case key.Matches(msg, k.Up):
		m.cursor--
	case key.Matches(msg, k.Down):
		m.cursor++
	case key.Matches(msg, k.PageUp):
		m.cursor -= page
	case key.Matches(msg, k.PageDown):
		m.cursor += page
	case key.Matches(msg, k.Top):
		m.cursor = 0
	case key.Matches(msg, k.Bottom):
		m.cursor = len(m.visible) - 1
	default:
		return
	}
	m.cursor = min(max(m.cursor, 0), max(len(m.visible)-1, 0))
	m.syncSelected()
	m.fixOffset()
}

// detailKey handles keys while the detail pane is open.
func (m *Model) detailKey(msg tea.KeyPressMsg) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Back, k.Detail):
		m.detail = false
	case key.Matches(msg, k.Up):
		m.detailOffset = max(m.detailOffset-1, 0)
	case key.Matches(msg, k.Down):
		m.detailOffset = min(m.detailOffset+1, max(len(m.detailAll(m.opts.Now()))-m.tableRows()-1, 0))
	case key.Matches(msg, k.Top):
		m.detailOffset = 0
	}
}

// editFilter edits the filter line: typing filters as you go, enter keeps
// the filter, esc clears it.
func (m *Model) editFilter(msg tea.KeyPressMsg) {
	switch {
	case msg.Code == tea.KeyEnter:
		m.filtering = false
	case msg.Code == tea.KeyEscape:
		m.filtering = false
		m.setFilter("")
	case msg.Code == tea.KeyBackspace:
		if r := []rune(m.filter); len(r) > 0 {
			m.setFilter(string(r[:len(r)-1]))
		}
	case msg.String() == "ctrl+u":
		m.setFilter("")
	case msg.Text != "" && msg.Mod&^tea.ModShift == 0:
		m.setFilter(m.filter + msg.Text)
	case msg.Code == tea.KeyUp, msg.Code == tea.KeyDown, msg.Code == tea.KeyPgUp, msg.Code == tea.KeyPgDown:
		m.moveKey(msg)
	}
}

func (m *Model) setFilter(f string) {
	if f == m.filter {
		return
	}
	m.filter = f
	m.filterWords = strings.Fields(strings.ToLower(f))
	m.reorder()
}

func (m *Model) setSort(c column) {
	m.sortCol, m.sortDesc = c, c.defaultDesc()
	m.reorder()
}

// fixOffset scrolls the table so that the cursor is on screen.
func (m *Model) fixOffset() {
	n := max(m.tableRows(), 1)
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+n {
		m.offset = m.cursor - n + 1
	}
	m.offset = max(min(m.offset, len(m.visible)-n), 0)
}

// Stale reports whether the data on screen is not current: the newest
// fetch failed, or the server answered from its last good snapshot.
func (m *Model) Stale() bool {
	return m.err != nil || (m.poll != nil && m.poll.Cluster.Stale)
}

// Last returns the poll on screen, nil before the first.
func (m *Model) Last() *Poll { return m.poll }

// Err returns the error of the newest fetch, nil when it succeeded.
func (m *Model) Err() error { return m.err }

// Failures returns the number of consecutive failed fetches.
func (m *Model) Failures() int { return m.failures }

// NextFetch returns when the next fetch is due, zero when none is
// scheduled (a fetch is in flight).
func (m *Model) NextFetch() time.Time { return m.nextAt }

// Applied returns the sequence number of the newest response applied.
func (m *Model) Applied() uint64 { return m.applied }

// VisibleNodes returns the IDs of the rows that pass the filter and the
// toggles, in display order (all of them, not only those on screen).
func (m *Model) VisibleNodes() []string {
	ids := make([]string, len(m.visible))
	for i, ri := range m.visible {
		ids[i] = m.rows[ri].node.NodeID
	}
	return ids
}

// bodyView is the body top shows.
type bodyView int

const (
	viewNodes bodyView = iota
	viewEvents
	viewCoordinators
)

// views are the :commands, by every prefix a user may type.
var views = []struct {
	name string
	v    bodyView
}{{"nodes", viewNodes}, {"events", viewEvents}, {"coordinators", viewCoordinators}}

// editCommand edits the : line: enter switches to the view it names (any
// prefix: :ev, :co), esc cancels.
func (m *Model) editCommand(msg tea.KeyPressMsg) {
	switch {
	case msg.Code == tea.KeyEnter:
		m.commanding = false
		c := strings.ToLower(strings.TrimSpace(m.command))
		for _, v := range views {
			if c != "" && strings.HasPrefix(v.name, c) {
				m.view, m.detail = v.v, false
				return
			}
		}
	case msg.Code == tea.KeyEscape:
		m.commanding = false
	case msg.Code == tea.KeyBackspace:
		if r := []rune(m.command); len(r) > 0 {
			m.command = string(r[:len(r)-1])
		}
	case msg.Text != "" && msg.Mod&^tea.ModShift == 0:
		m.command += msg.Text
	}
}
