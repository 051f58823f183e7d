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
//
// Model owns the fetch sequencing, the timers and backoff, the header and
// STALE banner, the help, the : command line and the focus; the node
// table, the detail pane, the events and the filter line are sub-models
// (see the package documentation) that it routes messages and keys to.
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
	lateCount int
	threshold time.Duration // late threshold of the current poll
	// coords are the indices in poll.Nodes of the coordinators, in poll
	// order: the coordinators pane reads them every frame, which must not
	// scan every node.
	coords []int

	// nodeTable is embedded so that its state reads as the model's
	// (m.cursor, m.sortCol) in the tests; the model's own code names it.
	nodeTable
	filterLine filterModel
	detailPane detailModel
	events     eventsModel

	// Focus: detail is the detail pane open over the table; view is the
	// body shown, the node table, the events or the coordinators
	// (k9s-style :view), which commanding/command edit. The filter line
	// has the focus while it is editing.
	detail     bool
	view       bodyView
	commanding bool
	command    string
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
	st, k := newStyles(), newKeyMap()
	m := &Model{
		opts:       opts,
		backoff:    opts.Backoff.withDefaults(opts.Refresh),
		st:         st,
		keys:       k,
		help:       st.help(),
		nodeTable:  newNodeTable(k, st),
		filterLine: newFilter(st),
		detailPane: newDetail(k, st, opts.Location),
		events:     newEvents(st, opts.Location),
	}
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
		m.fitTable()
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
	m.rebuild(msg)
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
	m.fitTable() // the banner takes rows
	if msg.Seq < m.seq {
		return nil
	}
	m.seq = msg.Seq
	return m.schedule(d)
}

// rebuild recomputes everything derived from the poll msg carried and
// hands it to the sub-models.
func (m *Model) rebuild(msg PollMsg) {
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
	rows := buildRows(m.poll.Nodes, rs, m.threshold.Milliseconds())
	m.lateCount = 0
	for i := range rows {
		if rows[i].late {
			m.lateCount++
		}
	}
	m.coords = m.coords[:0]
	for i := range m.poll.Nodes {
		if m.poll.Nodes[i].Role == "coordinator" {
			m.coords = append(m.coords, i)
		}
	}
	m.detailPane.threshold = m.threshold
	m.detailPane.statusInterval = time.Duration(m.poll.Cluster.Timing.StatusIntervalMs) * time.Millisecond
	m.events = m.events.Update(msg)
	// The chrome (header, panes) is the new poll's before the table
	// scrolls to fit under it.
	m.sizeTable()
	m.nodeTable.setRows(rows)
}

// sizeTable tells the node table its width and how many rows fit under
// the chrome now. It is called before each change of the table, since
// the chrome changes with the clock too (the banner's countdown).
func (m *Model) sizeTable() {
	w, _ := m.size()
	m.nodeTable.setSize(w, m.tableRows())
}

// fitTable sizes the table and scrolls it so that the cursor is on
// screen, after a change of the chrome (window, banner, help).
func (m *Model) fitTable() {
	m.sizeTable()
	m.nodeTable.fixOffset()
}

// handleKey routes a key: ctrl+c quits from anywhere; a focused line
// (the filter, the : command) takes every other key; then the keys of
// every view; then the focused body's.
func (m *Model) handleKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if msg.String() == "ctrl+c" {
		return m, tea.Quit
	}
	if m.filterLine.editing() {
		m.filterKey(msg)
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
		m.fitTable()
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
		m.fitTable()
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

// tableKey handles a key of the table view: the keys that move the focus
// (/ to the filter line, enter to the detail pane, esc clearing the
// filter) here, the rest in the node table.
func (m *Model) tableKey(msg tea.KeyPressMsg) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Filter):
		m.filterLine = m.filterLine.focus()
	case key.Matches(msg, k.Back):
		m.filterLine = m.filterLine.clear()
		m.applyFilter()
	case key.Matches(msg, k.Detail):
		if len(m.nodeTable.visible) > 0 {
			m.detail, m.detailPane = true, m.detailPane.open()
		}
	default:
		m.sizeTable()
		m.nodeTable = m.nodeTable.Update(msg)
	}
}

// filterKey hands a key to the filter line and applies what it asks:
// the new filter text, or a move of the table's cursor.
func (m *Model) filterKey(msg tea.KeyPressMsg) {
	var act filterAction
	m.filterLine, act = m.filterLine.Update(msg)
	if act == filterMove {
		m.sizeTable()
		m.nodeTable = m.nodeTable.Update(msg)
		return
	}
	m.applyFilter()
}

// applyFilter applies the filter line's text to the node table; the
// table does nothing when it is unchanged.
func (m *Model) applyFilter() {
	if m.filterLine.value() == m.nodeTable.filter {
		return
	}
	m.sizeTable()
	m.nodeTable.setFilter(m.filterLine.value())
}

// detailKey hands a key to the detail pane, telling it first how far its
// text can scroll.
func (m *Model) detailKey(msg tea.KeyPressMsg) {
	sel, r := m.nodeTable.selection()
	m.detailPane.maxOffset = max(len(m.detailPane.text(sel, r, m.opts.Now()))-m.tableRows()-1, 0)
	var closed bool
	m.detailPane, closed = m.detailPane.Update(msg)
	if closed {
		m.detail = false
	}
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
	return m.nodeTable.visibleIDs()
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
