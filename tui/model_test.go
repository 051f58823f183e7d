package tui

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/talonhq/talon/internal/apiv1"
)

// fetchRecorder is a FetchFunc that records the sequence numbers it was
// asked for and does nothing: the test delivers the responses.
type fetchRecorder struct{ seqs []uint64 }

func (f *fetchRecorder) fetch(seq uint64) tea.Cmd {
	f.seqs = append(f.seqs, seq)
	return func() tea.Msg { return nil }
}

// run executes cmd and the commands it batches, and returns the messages
// they produce. Timers return nil at once (Options.Done is closed).
func run(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	msg := cmd()
	if b, ok := msg.(tea.BatchMsg); ok {
		var out []tea.Msg
		for _, c := range b {
			out = append(out, run(c)...)
		}
		return out
	}
	if msg == nil {
		return nil
	}
	return []tea.Msg{msg}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"refresh below minimum", Options{Refresh: 100 * time.Millisecond}, "refresh 100ms: must be at least 500ms"},
		{"negative unhealthy-after", Options{UnhealthyAfter: -time.Second}, "unhealthy-after -1s: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want ErrInvalidOptions mentioning %q", err, tc.want)
			}
		})
	}
}

func TestOutOfOrderResponses(t *testing.T) {
	older, newer := fixture(0), fixture(1)
	for _, tc := range []struct {
		name string
		// msgs are delivered after fetches 1 (Init) and 2 (r) were issued.
		msgs      []tea.Msg
		wantSnap  *Poll
		wantStale bool
		applied   uint64
	}{
		{
			name:     "old poll after new one is dropped",
			msgs:     []tea.Msg{PollMsg{Seq: 2, Poll: newer}, PollMsg{Seq: 1, Poll: older}},
			wantSnap: newer, applied: 2,
		},
		{
			name:     "old error after new poll is dropped",
			msgs:     []tea.Msg{PollMsg{Seq: 2, Poll: newer}, FetchErrorMsg{Seq: 1, Err: apiv1.ErrUnavailable}},
			wantSnap: newer, applied: 2,
		},
		{
			name:     "old poll after new error is dropped",
			msgs:     []tea.Msg{FetchErrorMsg{Seq: 2, Err: apiv1.ErrUnavailable}, PollMsg{Seq: 1, Poll: older}},
			wantSnap: nil, wantStale: true, applied: 2,
		},
		{
			name:     "in order both apply",
			msgs:     []tea.Msg{PollMsg{Seq: 1, Poll: older}, PollMsg{Seq: 2, Poll: newer}},
			wantSnap: newer, applied: 2,
		},
		{
			name:     "duplicate is dropped",
			msgs:     []tea.Msg{PollMsg{Seq: 2, Poll: newer}, PollMsg{Seq: 2, Poll: older}},
			wantSnap: newer, applied: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			f := &fetchRecorder{}
			opts := testOptions(c)
			opts.Fetch = f.fetch
			m := newModel(t, opts)
			m.Init()
			send(m, keys("r")...)
			if !slices.Equal(f.seqs, []uint64{1, 2}) {
				t.Fatalf("fetches issued %v, want [1 2]", f.seqs)
			}
			send(m, tc.msgs...)
			if m.Last() != tc.wantSnap {
				t.Errorf("poll on screen is revision %v, want %v", revision(m.Last()), revision(tc.wantSnap))
			}
			if m.Stale() != tc.wantStale {
				t.Errorf("Stale() = %v, want %v", m.Stale(), tc.wantStale)
			}
			if m.Applied() != tc.applied {
				t.Errorf("Applied() = %d, want %d", m.Applied(), tc.applied)
			}
		})
	}
}

func revision(s *Poll) string {
	if s == nil {
		return "none"
	}
	return s.Cluster.Revision
}

// TestOneTimer checks that only the response to the newest fetch arms the
// refresh timer and that a superseded timer does not fetch.
func TestOneTimer(t *testing.T) {
	c := newClock()
	f := &fetchRecorder{}
	opts := testOptions(c)
	opts.Fetch = f.fetch
	m := newModel(t, opts)
	m.Init()
	// Response 1 arms the timer.
	if cmd := send(m, PollMsg{Seq: 1, Poll: fixture(0)}); cmd == nil {
		t.Fatal("response to the newest fetch armed no timer")
	}
	stale := refreshMsg{gen: m.timerGen}
	send(m, keys("r")...) // fetch 2 supersedes the timer
	if !m.NextFetch().IsZero() {
		t.Errorf("NextFetch() = %v while a fetch is in flight, want zero", m.NextFetch())
	}
	if cmd := send(m, stale); cmd != nil || len(f.seqs) != 2 {
		t.Fatalf("superseded timer: cmd %v, fetches %v; want no fetch", cmd != nil, f.seqs)
	}
	send(m, keys("r")...) // fetch 3
	// Response 2 arrives while 3 is in flight: applied, but arms nothing.
	if cmd := send(m, PollMsg{Seq: 2, Poll: fixture(1)}); cmd != nil {
		t.Error("response 2 armed a timer although fetch 3 was in flight")
	}
	if m.Applied() != 2 {
		t.Errorf("Applied() = %d, want 2", m.Applied())
	}
	if cmd := send(m, PollMsg{Seq: 3, Poll: fixture(2)}); cmd == nil {
		t.Fatal("response 3 armed no timer")
	}
	if got, want := m.NextFetch(), c.Now().Add(DefaultRefresh); !got.Equal(want) {
		t.Errorf("NextFetch() = %v, want %v", got, want)
	}
	// The live timer fetches.
	send(m, refreshMsg{gen: m.timerGen})
	if !slices.Equal(f.seqs, []uint64{1, 2, 3, 4}) {
		t.Errorf("fetches %v, want [1 2 3 4]", f.seqs)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Max: DefaultBackoffMax}.withDefaults(2 * time.Second) // an explicit, longer cap
	for _, tc := range []struct {
		failures int
		r        float64
		want     time.Duration
	}{
		{1, 0.5, 2 * time.Second},
		{2, 0.5, 4 * time.Second},
		{3, 0.5, 8 * time.Second},
		{4, 0.5, 16 * time.Second},
		{5, 0.5, 30 * time.Second}, // 32s capped
		{50, 0.5, 30 * time.Second},
		{1, 0, 1600 * time.Millisecond},           // -20%
		{1, 0.999999, 2399999 * time.Microsecond}, // just under +20%
		{5, 0.999999, 30 * time.Second},           // jitter never exceeds the cap
		{4, 0, 12800 * time.Millisecond},
		{0, 0.5, 2 * time.Second}, // treated as the first failure
	} {
		t.Run(fmt.Sprintf("%d failures r=%v", tc.failures, tc.r), func(t *testing.T) {
			got := b.Delay(tc.failures, tc.r)
			if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("Delay(%d, %v) = %v, want %v", tc.failures, tc.r, got, tc.want)
			}
		})
	}
	t.Run("default cap is the refresh", func(t *testing.T) {
		d := Backoff{}.withDefaults(2 * time.Second)
		for _, f := range []int{1, 2, 5, 50} {
			for _, r := range []float64{0, 0.5, 0.999999} {
				if got := d.Delay(f, r); got > 2*time.Second {
					t.Errorf("Delay(%d, %v) = %v, more than the 2s refresh", f, r, got)
				}
			}
		}
	})
	t.Run("defaults", func(t *testing.T) {
		got := Backoff{}.withDefaults(time.Minute)
		want := Backoff{Initial: time.Minute, Max: time.Minute, Multiplier: 2, Jitter: 0.2}
		if got != want {
			t.Errorf("withDefaults(1m) = %+v, want %+v (the cap never below the refresh)", got, want)
		}
	})
}

// TestBackoffSchedule checks the retry times the model arms and shows while
// the API fails, Retry-After, and the reset on recovery.
func TestBackoffSchedule(t *testing.T) {
	c := newClock()
	f := &fetchRecorder{}
	opts := testOptions(c)
	opts.Fetch = f.fetch
	opts.Backoff.Max = DefaultBackoffMax // an explicit, longer cap than the refresh
	m := newModel(t, opts)
	m.Init()
	send(m, PollMsg{Seq: 1, Poll: fixture(0)})
	unavailable := fmt.Errorf("%w: GET /api/v1/cluster: connection refused", apiv1.ErrUnavailable)
	for i, want := range []time.Duration{2, 4, 8, 16, 30, 30} {
		send(m, refreshMsg{gen: m.timerGen})
		send(m, FetchErrorMsg{Seq: f.seqs[len(f.seqs)-1], Err: unavailable})
		if m.Failures() != i+1 {
			t.Fatalf("Failures() = %d, want %d", m.Failures(), i+1)
		}
		if got := m.NextFetch().Sub(c.Now()); got != want*time.Second {
			t.Errorf("after %d failures the next fetch is in %v, want %v", i+1, got, want*time.Second)
		}
		if !strings.Contains(view(m), fmt.Sprintf("next retry in %ds", want)) {
			t.Errorf("after %d failures the view does not say the next retry is in %ds:\n%s", i+1, want, view(m))
		}
	}
	// A longer Retry-After wins, within the cap.
	m2 := newModel(t, opts)
	send(m2, PollMsg{Seq: 1, Poll: fixture(0)})
	send(m2, FetchErrorMsg{Seq: 2, Err: &apiv1.APIError{HTTPStatus: http.StatusServiceUnavailable, Code: apiv1.CodeNotReady, RetryAfter: 7 * time.Second}})
	if got := m2.NextFetch().Sub(c.Now()); got != 7*time.Second {
		t.Errorf("with Retry-After 7s the next fetch is in %v, want 7s", got)
	}
	send(m2, FetchErrorMsg{Seq: 3, Err: &apiv1.APIError{HTTPStatus: http.StatusServiceUnavailable, RetryAfter: time.Hour}})
	if got := m2.NextFetch().Sub(c.Now()); got != DefaultBackoffMax {
		t.Errorf("with Retry-After 1h the next fetch is in %v, want the cap %v", got, DefaultBackoffMax)
	}
	// Recovery resets the backoff.
	send(m, refreshMsg{gen: m.timerGen})
	send(m, PollMsg{Seq: f.seqs[len(f.seqs)-1], Poll: fixture(1)})
	if m.Failures() != 0 || m.Err() != nil || m.Stale() {
		t.Errorf("after recovery: failures %d, err %v, stale %v", m.Failures(), m.Err(), m.Stale())
	}
	if got := m.NextFetch().Sub(c.Now()); got != DefaultRefresh {
		t.Errorf("after recovery the next fetch is in %v, want %v", got, DefaultRefresh)
	}
}

// TestErrorsNeverQuitOrBlank checks every kind of fetch error keeps the
// last poll on screen and returns no quit command.
func TestErrorsNeverQuitOrBlank(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unreachable", fmt.Errorf("%w: GET /api/v1/cluster: dial tcp: connection refused", apiv1.ErrUnavailable), "connection refused"},
		{"503", &apiv1.APIError{Server: "http://c:9090", HTTPStatus: 503, Code: apiv1.CodeNotReady, Message: "no current cluster snapshot"}, "503 not_ready"},
		{"timeout", fmt.Errorf("admin api: GET /api/v1/nodes: %w", errors.New("context deadline exceeded")), "deadline exceeded"},
		{"unauthorized", &apiv1.APIError{Server: "http://c:9090", HTTPStatus: 401, Code: apiv1.CodeUnauthenticated, Message: "bearer token required"}, "401 unauthenticated"},
		{"nil error", nil, "fetch failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			m := newModel(t, testOptions(c))
			send(m, tea.WindowSizeMsg{Width: 160, Height: 30}, PollMsg{Seq: 1, Poll: fixture(0)})
			cmd := send(m, FetchErrorMsg{Seq: 2, Err: tc.err})
			for _, msg := range run(cmd) {
				if _, ok := msg.(tea.QuitMsg); ok {
					t.Fatal("the model quit on a fetch error")
				}
			}
			v := view(m)
			for _, s := range []string{"STALE", "observed 11:59:59 (0.5s ago)", tc.want, "w-01", "coord-b", "w-06"} {
				if !strings.Contains(v, s) {
					t.Errorf("view lacks %q:\n%s", s, v)
				}
			}
		})
	}
}

func TestQuitKeys(t *testing.T) {
	for _, k := range []tea.KeyPressMsg{{Code: 'q', Text: "q"}, {Code: 'c', Mod: tea.ModCtrl}} {
		t.Run(k.String(), func(t *testing.T) {
			m := newModel(t, testOptions(newClock()))
			msgs := run(send(m, k))
			if len(msgs) != 1 {
				t.Fatalf("%s produced %v, want a QuitMsg", k, msgs)
			}
			if _, ok := msgs[0].(tea.QuitMsg); !ok {
				t.Fatalf("%s produced %T, want tea.QuitMsg", k, msgs[0])
			}
		})
	}
	t.Run("q while filtering types q", func(t *testing.T) {
		m := newModel(t, testOptions(newClock()))
		send(m, PollMsg{Seq: 1, Poll: fixture(0)})
		if cmd := send(m, keys("/q")...); cmd != nil {
			t.Fatal("q in the filter line returned a command")
		}
		if m.filter != "q" {
			t.Fatalf("filter %q, want q", m.filter)
		}
	})
}

func TestRates(t *testing.T) {
	base := apiv1.Node{NodeID: "w", Role: "worker", IncarnationID: "i1", UpdatedAtUnixMs: 10_000,
		Counters: apiv1.Counters{RequestsTotal: 1000, HitsTotal: 800, MissesTotal: 200, BytesServedTotal: 1 << 20, EvictionsTotal: 10}}
	later := func(dtMs int64, f func(*apiv1.Node)) apiv1.Node {
		n := base
		n.UpdatedAtUnixMs += dtMs
		f(&n)
		return n
	}
	for _, tc := range []struct {
		name string
		next apiv1.Node
		want rates
	}{
		{"between heartbeats", later(2000, func(n *apiv1.Node) {
			n.Counters.RequestsTotal += 200
			n.Counters.HitsTotal += 150
			n.Counters.MissesTotal += 50
			n.Counters.BytesServedTotal += 4 << 20
			n.Counters.EvictionsTotal += 3
		}), rates{known: true, reqPerSec: 100, hitRatio: 0.75, bytesPerSec: 2 << 20, evictPerSec: 1.5}},
		{"no lookups", later(1000, func(*apiv1.Node) {}), rates{known: true, hitRatio: -1}},
		{"new incarnation", later(2000, func(n *apiv1.Node) {
			n.IncarnationID = "i2"
			n.Counters = apiv1.Counters{RequestsTotal: 5}
		}), rates{}},
		{"counter went back", later(2000, func(n *apiv1.Node) { n.Counters.RequestsTotal = 3 }), rates{}},
		{"clock went back", later(-1000, func(n *apiv1.Node) { n.Counters.RequestsTotal += 10 }), rates{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr rateTracker
			if got := tr.observe([]apiv1.Node{base}); got[0].known {
				t.Fatalf("first sample has a rate: %+v", got[0])
			}
			if got := tr.observe([]apiv1.Node{tc.next}); got[0] != tc.want {
				t.Errorf("rate %+v, want %+v", got[0], tc.want)
			}
		})
	}
	t.Run("no new heartbeat keeps the rate", func(t *testing.T) {
		var tr rateTracker
		n2 := later(1000, func(n *apiv1.Node) { n.Counters.RequestsTotal += 50 })
		tr.observe([]apiv1.Node{base})
		first := tr.observe([]apiv1.Node{n2})[0]
		if again := tr.observe([]apiv1.Node{n2})[0]; again != first || !first.known || first.reqPerSec != 50 {
			t.Errorf("rates %+v then %+v, want 50 req/s twice", first, again)
		}
	})
	t.Run("after a reset the next heartbeat has a rate", func(t *testing.T) {
		var tr rateTracker
		reset := later(1000, func(n *apiv1.Node) { n.IncarnationID = "i2"; n.Counters = apiv1.Counters{RequestsTotal: 10} })
		next := reset
		next.UpdatedAtUnixMs += 1000
		next.Counters.RequestsTotal = 30
		tr.observe([]apiv1.Node{base})
		tr.observe([]apiv1.Node{reset})
		if got := tr.observe([]apiv1.Node{next})[0]; !got.known || got.reqPerSec != 20 {
			t.Errorf("rate %+v, want 20 req/s", got)
		}
	})
	t.Run("renewals between status writes keep the rate", func(t *testing.T) {
		// Kubernetes shows each renewal in updatedAtUnixMs while the
		// counters move only with the status (once a status interval):
		// rates are over statusAtUnixMs, never zero between status writes
		// and then a spike over one heartbeat.
		var tr rateTracker
		a := base
		a.StatusAtUnixMs = 10_000
		b := a
		b.UpdatedAtUnixMs, b.StatusAtUnixMs = 70_000, 70_000
		b.Counters.RequestsTotal += 6000
		renewed := b
		renewed.UpdatedAtUnixMs = 75_000 // a renewal: same status, same counters
		tr.observe([]apiv1.Node{a})
		first := tr.observe([]apiv1.Node{b})[0]
		again := tr.observe([]apiv1.Node{renewed})[0]
		if first.reqPerSec != 100 || again != first {
			t.Errorf("rates %+v then, after a renewal, %+v; want 100 req/s twice", first, again)
		}
	})
	t.Run("departed nodes are forgotten", func(t *testing.T) {
		var tr rateTracker
		tr.observe([]apiv1.Node{base})
		tr.observe(nil)
		if len(tr.last) != 0 {
			t.Errorf("tracker holds %d nodes after they left", len(tr.last))
		}
	})
}

func TestLateThreshold(t *testing.T) {
	for _, tc := range []struct {
		name        string
		apiMs       int64
		opt         time.Duration
		ageMs       int64
		wantLate    bool
		wantSummary string
		hbMs        int64  // timing.heartbeatIntervalMs
		health      string // effective health, "" for healthy (reported healthy)
	}{
		// Issue 38: the age is the last heartbeat's, which no mark moves
		// and renewals through other coordinators reach within about
		// unhealthy-after; a worker silent for 18 s is late.
		{"silent past unhealthy-after plus a heartbeat interval", 15_000, 0, 18_000, true, "late heartbeats (>16s) 1", 1000, ""},
		{"within unhealthy-after plus a heartbeat interval", 15_000, 0, 15_900, false, "late heartbeats (>16s) 0", 1000, ""},
		{"marked late by the store, young heartbeat", 15_000, 0, 1000, true, "late heartbeats (>16s) 1", 1000, "unhealthy"},
		{"api threshold, below", 3000, 0, 2999, false, "late heartbeats (>3s) 0", 0, ""},
		{"api threshold, above", 3000, 0, 3001, true, "late heartbeats (>3s) 1", 0, ""},
		{"default when the api has none", 0, 0, 15001, true, "late heartbeats (>15s) 1", 0, ""},
		{"default, below", 0, 0, 14000, false, "late heartbeats (>15s) 0", 0, ""},
		{"option when the api has none", 0, 5 * time.Second, 6000, true, "late heartbeats (>5s) 1", 0, ""},
		{"api wins over the option", 20_000, 5 * time.Second, 6000, false, "late heartbeats (>20s) 0", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(newClock())
			opts.UnhealthyAfter = tc.opt
			m := newModel(t, opts)
			s := fixture(0)
			s.Cluster.Timing.UnhealthyAfterMs = tc.apiMs
			s.Nodes = s.Nodes[:1]
			s.Nodes[0].HeartbeatAgeMs = tc.ageMs
			s.Cluster.Timing.HeartbeatIntervalMs = tc.hbMs
			if tc.health != "" {
				s.Nodes[0].Health = tc.health
			}
			send(m, tea.WindowSizeMsg{Width: 200, Height: 20}, PollMsg{Seq: 1, Poll: s})
			if m.rows[0].late != tc.wantLate {
				t.Errorf("late = %v, want %v", m.rows[0].late, tc.wantLate)
			}
			v := view(m)
			if !strings.Contains(v, tc.wantSummary) {
				t.Errorf("view lacks %q:\n%s", tc.wantSummary, v)
			}
			if marked := strings.Contains(v, "! coord"); marked != tc.wantLate {
				t.Errorf("row marked late: %v, want %v:\n%s", marked, tc.wantLate, v)
			}
		})
	}
}

// TestLateRowStandsOutInColour checks that with colours the late and
// unhealthy rows are styled and the healthy ones are not, even though the
// poll is fresh.
func TestLateRowStandsOutInColour(t *testing.T) {
	m := newModel(t, testOptions(newClock()))
	send(m, tea.WindowSizeMsg{Width: 160, Height: 30}, PollMsg{Seq: 1, Poll: fixture(0)})
	if m.Stale() {
		t.Fatal("fresh poll reported stale")
	}
	var late, healthy string
	var b strings.Builder
	if err := m.WriteAll(&b, colorprofile.ANSI256); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		switch {
		case strings.Contains(l, "w-05"):
			late = l
		case strings.Contains(l, "w-02"):
			healthy = l
		}
	}
	if !strings.Contains(late, "\x1b[") || !strings.Contains(late, " ! ") {
		t.Errorf("late row is neither styled nor marked: %q", late)
	}
	if strings.Contains(healthy, "\x1b[") {
		t.Errorf("healthy row is styled: %q", healthy)
	}
}

func TestNoColourProfileHasNoEscapes(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	send(m, tea.WindowSizeMsg{Width: 160, Height: 30}, PollMsg{Seq: 1, Poll: fixture(0)},
		FetchErrorMsg{Seq: 2, Err: apiv1.ErrUnavailable})
	send(m, keys("?")...)
	var b strings.Builder
	if err := m.WriteAll(&b, colorprofile.NoTTY); err != nil {
		t.Fatal(err)
	}
	if v := b.String(); strings.Contains(v, "\x1b") || !strings.Contains(v, "STALE") {
		t.Errorf("NoTTY frame has escape sequences or lacks the banner: %q", v)
	}
	// Ascii (NO_COLOR on a terminal) keeps bold and faint, never a colour.
	b.Reset()
	if err := m.WriteAll(&b, colorprofile.Ascii); err != nil {
		t.Fatal(err)
	}
	colour := regexp.MustCompile(`\x1b\[(?:[0-9]*;)*(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])[;m]`)
	if v := b.String(); colour.MatchString(v) || !strings.Contains(v, "\x1b[1m") {
		t.Errorf("Ascii frame has colours or no bold: %q", v)
	}
}

func TestFilterSortAndToggles(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys string
		want []string
	}{
		{"api order", "", []string{"coord-a", "coord-b", "w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{"filter by id", "/w-0\n", []string{"w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{"filter words all match", "/worker z3\n", []string{"w-03"}},
		{"filter by health", "/degraded\n", []string{"w-04"}},
		{"filter late", "/late\n", []string{"w-05"}},
		{"filter not ready", "/not-ready\n", []string{"w-06"}},
		{"filter edit", "/w-0x\b6\n", []string{"w-06"}},
		{"esc clears the filter", "/w-03\n\x1b", []string{"coord-a", "coord-b", "w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{"no match", "/nothing\n", []string{}},
		{"sort by node", "s", []string{"coord-a", "coord-b", "w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{"sort by health, worst first", "ss", []string{"w-05", "w-04", "coord-a", "coord-b", "w-01", "w-02", "w-03", "w-06"}},
		{"sort by heartbeat age", "ssss", []string{"w-05", "w-06", "w-04", "w-03", "w-02", "w-01", "coord-a", "coord-b"}},
		{"sort by age reversed", "sssso", []string{"coord-a", "coord-b", "w-01", "w-02", "w-03", "w-04", "w-06", "w-05"}},
		{"sort by requests/s, unknown last", "sssssss", []string{"w-06", "w-04", "w-03", "w-02", "w-01", "coord-a", "coord-b", "w-05"}},
		{"sort by requests/s reversed, unknown still last", "ssssssso", []string{"w-01", "w-02", "w-03", "w-04", "w-06", "coord-a", "coord-b", "w-05"}},
		{"previous column wraps to resident", "S", []string{"w-06", "w-05", "w-04", "w-03", "w-02", "w-01", "coord-a", "coord-b"}},
		{"hide coordinators", "c", []string{"w-01", "w-02", "w-03", "w-04", "w-05", "w-06"}},
		{"hide workers", "w", []string{"coord-a", "coord-b"}},
		{"problems only", "u", []string{"w-04", "w-05", "w-06"}},
		{"problems only, workers hidden", "uw", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			m := newModel(t, testOptions(c))
			send(m, PollMsg{Seq: 1, Poll: fixture(0)})
			c.Advance(2 * time.Second)
			send(m, PollMsg{Seq: 2, Poll: fixture(1)})
			send(m, keys(tc.keys)...)
			if got := m.VisibleNodes(); !slices.Equal(got, tc.want) {
				t.Errorf("rows %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectionFollowsNode(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	send(m, PollMsg{Seq: 1, Poll: fixture(0)})
	send(m, keys("jjj")...) // w-02
	if got := m.VisibleNodes()[m.cursor]; got != "w-02" {
		t.Fatalf("cursor on %s, want w-02", got)
	}
	send(m, keys("o")...) // reverse: w-02 moves
	if got := m.VisibleNodes()[m.cursor]; got != "w-02" {
		t.Errorf("after reordering the cursor is on %s, want w-02", got)
	}
	send(m, PollMsg{Seq: 2, Poll: fixture(1)})
	if got := m.VisibleNodes()[m.cursor]; got != "w-02" {
		t.Errorf("after a new poll the cursor is on %s, want w-02", got)
	}
	send(m, keys("\n")...)
	if !m.detail || !strings.Contains(view(m), "worker w-02 · esc back") {
		t.Errorf("enter did not open w-02's detail:\n%s", view(m))
	}
	send(m, keys("\x1b")...)
	if m.detail {
		t.Error("esc did not close the detail pane")
	}
}

// TestWindowing checks that a large cluster renders exactly the rows that
// fit, and that paging moves the window.
func TestWindowing(t *testing.T) {
	const n = 5000
	m := newModel(t, testOptions(newClock()))
	send(m, tea.WindowSizeMsg{Width: 160, Height: 30}, PollMsg{Seq: 1, Poll: bigPoll(n, 0)})
	v := view(m)
	if lines := strings.Count(v, "\n") + 1; lines != 30 {
		t.Fatalf("view has %d lines, want 30", lines)
	}
	rows := m.tableRows()
	if got := strings.Count(v, " 1.4.2 "); got != rows {
		t.Errorf("view shows %d node rows, want %d", got, rows)
	}
	send(m, tea.KeyPressMsg{Code: tea.KeyPgDown})
	if m.cursor != rows || m.offset != 1 {
		t.Errorf("after page down: cursor %d offset %d, want %d and 1", m.cursor, m.offset, rows)
	}
	send(m, keys("G")...)
	if m.cursor != n-1 || !strings.Contains(view(m), "w-04999") {
		t.Errorf("after G: cursor %d, last row not shown", m.cursor)
	}
	if got := strings.Count(view(m), "\n") + 1; got != 30 {
		t.Errorf("view at the end has %d lines, want 30", got)
	}
	// The banner takes rows: the cursor stays visible.
	send(m, FetchErrorMsg{Seq: 2, Err: apiv1.ErrUnavailable})
	if v := view(m); !strings.Contains(v, "w-04999") || !strings.Contains(v, "STALE") {
		t.Errorf("with the banner the cursor row is gone:\n%s", v)
	}
	if got := strings.Count(m.ViewAll(), " 1.4.2 "); got != n {
		t.Errorf("ViewAll shows %d rows, want %d", got, n)
	}
}

// TestWindowingAtScale: at 20,000 nodes in a 200x60 terminal (the
// coordinators pane on) a frame holds the header, the coordinators and
// exactly the rows that fit, the window's and no other; the coordinators
// pane finds coordinators wherever the poll lists them (here last, after
// every worker; the pane keeps their indices per poll rather than
// scanning every node each frame).
func TestWindowingAtScale(t *testing.T) {
	const n = scaleNodes
	p := bigPoll(n, 0)
	p.Nodes = append(p.Nodes[3:], p.Nodes[:3]...) // coordinators last
	m := newModel(t, testOptions(newClock()))
	send(m, tea.WindowSizeMsg{Width: 200, Height: 60}, PollMsg{Seq: 1, Poll: p})
	v := view(m)
	if lines := strings.Count(v, "\n") + 1; lines != 60 {
		t.Fatalf("view has %d lines, want 60", lines)
	}
	if !strings.Contains(v, "COORDINATORS as their records show them") {
		t.Fatalf("no coordinators pane:\n%s", v)
	}
	for _, id := range []string{"coord-0", "coord-1", "coord-2"} {
		// Once in the table, once in the pane.
		if got := strings.Count(v, " "+id+" "); got != 2 {
			t.Errorf("%s shown %d times, want 2 (table and pane):\n%s", id, got, v)
		}
	}
	rows := m.tableRows()
	if got := strings.Count(v, " 1.4.2 "); got != rows+3 { // +3: the pane's coordinators
		t.Errorf("view shows %d rows with a version, want %d table rows and 3 in the pane", got, rows)
	}
	// The window is the first rows in sort order (role, node ID) and
	// nothing after it.
	if last := fmt.Sprintf("w-%05d", rows-1); !strings.Contains(v, last) || strings.Contains(v, fmt.Sprintf("w-%05d", rows)) {
		t.Errorf("window is not rows 0..%d:\n%s", rows-1, v)
	}
	send(m, keys("G")...)
	v = view(m)
	if !strings.Contains(v, fmt.Sprintf("w-%05d", n-1)) || strings.Contains(v, "w-00003 ") || strings.Contains(v, fmt.Sprintf("w-%05d", n-1-rows)) {
		t.Errorf("after G the window is not the last %d rows:\n%s", rows, v)
	}
	if got := strings.Count(v, " 1.4.2 "); got != rows+3 {
		t.Errorf("view at the end shows %d rows with a version, want %d+3", got, rows)
	}
}

func TestNoDataYet(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	if v := view(m); !strings.Contains(v, "waiting for the first snapshot") || strings.Contains(v, "STALE") {
		t.Errorf("initial view:\n%s", v)
	}
	send(m, FetchErrorMsg{Seq: 1, Err: apiv1.ErrUnavailable})
	v := view(m)
	for _, s := range []string{"NO DATA", "no snapshot received yet", "admin api unavailable", "next retry in 2s"} {
		if !strings.Contains(v, s) {
			t.Errorf("view lacks %q:\n%s", s, v)
		}
	}
}

func TestServerStaleSnapshot(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	s := fixture(0)
	s.Cluster.Stale = true
	s.Cluster.Store = apiv1.StoreStatus{Backend: "etcd", ErrorCode: "timeout"}
	s.Cluster.GeneratedAtUnixMs = s.Cluster.ObservedAtUnixMs + 40_000
	send(m, PollMsg{Seq: 1, Poll: s})
	if !m.Stale() {
		t.Fatal("a snapshot the server marked stale is not shown as stale")
	}
	v := view(m)
	for _, s := range []string{"STALE", "the coordinator answered from its last good snapshot", "(40s ago)", "store etcd unavailable (timeout)", "store etcd UNHEALTHY (timeout)"} {
		if !strings.Contains(v, s) {
			t.Errorf("view lacks %q:\n%s", s, v)
		}
	}
}

func TestDataAgeIgnoresClockSkew(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	s := fixture(0)
	// The server's clock is an hour ahead; its answer was 2s old when sent.
	s.Cluster.ObservedAtUnixMs = t0.Add(time.Hour).UnixMilli()
	s.Cluster.GeneratedAtUnixMs = t0.Add(time.Hour + 2*time.Second).UnixMilli()
	send(m, PollMsg{Seq: 1, Poll: s})
	c.Advance(5 * time.Second)
	if v := view(m); !strings.Contains(v, "observed 7.0s ago") {
		t.Errorf("data age is not 7.0s:\n%s", v)
	}
}

// TestLongErrorWraps checks that a long error takes two banner lines, the
// second cut with "…", and that no line is wider than the terminal.
func TestLongErrorWraps(t *testing.T) {
	m := newModel(t, testOptions(newClock()))
	long := "admin api unavailable: GET /api/v1/cluster: " + strings.Repeat("dial tcp 10.0.0.1:9090: connect: connection refused; ", 6)
	send(m, tea.WindowSizeMsg{Width: 80, Height: 30}, PollMsg{Seq: 1, Poll: fixture(0)}, FetchErrorMsg{Seq: 2, Err: errors.New(long)})
	v := view(m)
	lines := strings.Split(v, "\n")
	var errLines []string
	for i, l := range lines {
		if w := lipgloss.Width(l); w > 80 {
			t.Errorf("line %d is %d cells wide: %q", i, w, l)
		}
		if strings.Contains(l, "error: admin api unavailable") {
			errLines = lines[i : i+2]
		}
	}
	if len(errLines) != 2 || !strings.Contains(errLines[1], "connect") || !strings.HasSuffix(strings.TrimRight(errLines[1], " ┃"), "…") {
		t.Errorf("error lines %q, want two with the second cut with …\n%s", errLines, v)
	}
}

// TestHeaderWhileFailing: once fetches fail, the header no longer says the
// store is healthy, and the banner gives the flag, not the API parameter.
func TestHeaderWhileFailing(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	send(m, PollMsg{Seq: 1, Poll: fixture(0)})
	if v := view(m); !strings.Contains(v, "store etcd healthy") {
		t.Fatalf("fresh view: %s", v)
	}
	err := &apiv1.APIError{HTTPStatus: http.StatusServiceUnavailable, Code: apiv1.CodeNotReady,
		Message: "no current cluster snapshot: the shared store could not be read in time (failing closed); retry, or add allowStale=true for the last good snapshot marked stale"}
	send(m, FetchErrorMsg{Seq: 2, Err: err})
	v := view(m)
	if strings.Contains(v, "store etcd healthy") || !strings.Contains(v, "store etcd UNKNOWN") {
		t.Errorf("failing view still says the store is healthy:\n%s", v)
	}
	if strings.Contains(v, "allowStale=true") || !strings.Contains(v, "--allow-stale") {
		t.Errorf("the banner names the API parameter:\n%s", v)
	}
	stale := fixture(1)
	stale.Cluster.Stale, stale.Cluster.Store.Healthy = true, false
	send(m, PollMsg{Seq: 3, Poll: stale})
	if v := view(m); strings.Contains(v, "store etcd healthy") || !strings.Contains(v, "UNHEALTHY") {
		t.Errorf("stale answer:\n%s", v)
	}
}

// TestRecoveryWithinOneRefresh: however many fetches failed, the next
// one is due within one refresh interval, so the view is current within
// one interval of the API's return.
func TestRecoveryWithinOneRefresh(t *testing.T) {
	c := newClock()
	f := &fetchRecorder{}
	opts := testOptions(c)
	opts.Fetch = f.fetch
	m := newModel(t, opts)
	m.Init()
	send(m, PollMsg{Seq: 1, Poll: fixture(0)})
	unavailable := fmt.Errorf("%w: connection refused", apiv1.ErrUnavailable)
	for i := range 20 {
		send(m, refreshMsg{gen: m.timerGen})
		send(m, FetchErrorMsg{Seq: f.seqs[len(f.seqs)-1], Err: unavailable})
		if got := m.NextFetch().Sub(c.Now()); got > DefaultRefresh {
			t.Fatalf("after %d failures the next fetch is %s away, more than the %s refresh", i+1, got, DefaultRefresh)
		}
	}
}

// TestEventsPane: a terminal of 40 rows or more shows the newest events
// below the table; a 24-row one does not (the table needs the rows).
func TestEventsPane(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	p := fixture(0)
	for i := range 30 {
		p.Events = append(p.Events, apiv1.Event{Seq: uint64(i + 1), TimeUnixMs: t0.UnixMilli(), Type: "node_readiness_changed", Coordinator: "coord-a",
			Role: "worker", NodeID: fmt.Sprintf("w-%02d", i), Old: "ready", New: "not_ready", Reason: "cordoned"})
	}
	send(m, PollMsg{Seq: 1, Poll: p})
	for _, tc := range []struct {
		w, h int
		want bool
	}{{80, 24, false}, {120, 40, true}, {200, 60, true}} {
		send(m, tea.WindowSizeMsg{Width: tc.w, Height: tc.h})
		v := view(m)
		if got := strings.Contains(v, "EVENTS of coord-a"); got != tc.want {
			t.Errorf("%dx%d: events pane shown = %v, want %v:\n%s", tc.w, tc.h, got, tc.want, v)
		}
		if lines := strings.Split(v, "\n"); len(lines) != tc.h {
			t.Errorf("%dx%d: %d lines", tc.w, tc.h, len(lines))
		}
		if tc.want && !strings.Contains(v, "worker/w-29") {
			t.Errorf("%dx%d: the newest event is missing:\n%s", tc.w, tc.h, v)
		}
		for _, must := range []string{"observed", "? help", "q quit", "w-01"} {
			if !strings.Contains(v, must) {
				t.Errorf("%dx%d: lacks %q", tc.w, tc.h, must)
			}
		}
	}
}

// TestCoordinatorsPane: a 200×60 terminal shows each coordinator, the
// answering one with its own view; 120×40 has no room for it.
func TestCoordinatorsPane(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	send(m, PollMsg{Seq: 1, Poll: fixture(0)})
	send(m, tea.WindowSizeMsg{Width: 200, Height: 60})
	v := view(m)
	if !strings.Contains(v, "COORDINATORS as their records show them") || !strings.Contains(v, "answering: revision 4200") {
		t.Errorf("200x60: no coordinators pane:\n%s", v)
	}
	send(m, tea.WindowSizeMsg{Width: 120, Height: 40})
	if v := view(m); strings.Contains(v, "COORDINATORS as") {
		t.Errorf("120x40: a coordinators pane:\n%s", v)
	}
}

// TestCommandViewsAndShiftSort: ":ev" enter shows the events as the body,
// ":co" the coordinators, esc returns to the nodes; Shift+letter sorts by
// a column at once.
func TestCommandViewsAndShiftSort(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	p := fixture(0)
	p.Events = []apiv1.Event{{Seq: 1, TimeUnixMs: t0.UnixMilli(), Type: "node_joined", Coordinator: "coord-a", Role: "worker", NodeID: "w-01", New: "healthy"}}
	send(m, PollMsg{Seq: 1, Poll: p}, tea.WindowSizeMsg{Width: 100, Height: 24})
	typeKeys := func(s string) {
		for _, r := range s {
			send(m, tea.KeyPressMsg{Code: r, Text: string(r)})
		}
	}
	typeKeys(":ev")
	if v := view(m); !strings.Contains(v, ":ev█") {
		t.Fatalf("no command line:\n%s", v)
	}
	send(m, tea.KeyPressMsg{Code: tea.KeyEnter})
	if v := view(m); !strings.Contains(v, "EVENTS of coord-a") || !strings.Contains(v, "worker/w-01") || strings.Contains(v, "RESIDENT/CAP") {
		t.Fatalf(":events view:\n%s", v)
	}
	typeKeys(":co")
	send(m, tea.KeyPressMsg{Code: tea.KeyEnter})
	if v := view(m); !strings.Contains(v, "COORDINATORS as their records show them") {
		t.Fatalf(":coordinators view:\n%s", v)
	}
	send(m, tea.KeyPressMsg{Code: tea.KeyEscape})
	if v := view(m); !strings.Contains(v, "RESIDENT/CAP") {
		t.Fatalf("esc did not return to the nodes:\n%s", v)
	}
	typeKeys("A")
	if m.sortCol != colAge {
		t.Errorf("Shift+A sorts by %s, want HB AGE", m.sortCol.name())
	}
	typeKeys("N")
	if m.sortCol != colNode {
		t.Errorf("Shift+N sorts by %s, want NODE", m.sortCol.name())
	}
}

// TestHelpClosesWithEscOrQ: with the full help open, Esc and q close it
// and q does not quit (issue 38); q quits once the help is closed.
func TestHelpClosesWithEscOrQ(t *testing.T) {
	for _, closeKey := range []string{"\x1b", "q"} {
		m := newModel(t, testOptions(newClock()))
		send(m, tea.WindowSizeMsg{Width: 160, Height: 40}, PollMsg{Seq: 1, Poll: fixture(0)})
		send(m, keys("?")...)
		if !m.help.ShowAll {
			t.Fatal("? did not open the help")
		}
		if cmd := send(m, keys(closeKey)...); cmd != nil {
			if _, quit := cmd().(tea.QuitMsg); quit {
				t.Fatalf("%q in the help quit top, want the help closed", closeKey)
			}
		}
		if m.help.ShowAll {
			t.Errorf("%q left the help open", closeKey)
		}
		cmd := send(m, keys("q")...)
		if cmd == nil {
			t.Fatal("q with the help closed did not quit")
		}
		if _, quit := cmd().(tea.QuitMsg); !quit {
			t.Fatal("q with the help closed did not quit")
		}
	}
}

// TestReadyAlwaysShown: at 80 columns READY stays on screen (issue 38: a
// cordoned worker differed from the others only by colour) and scrolling
// right keeps it pinned.
func TestReadyAlwaysShown(t *testing.T) {
	m := newModel(t, testOptions(newClock()))
	s := fixture(0)
	for i := range s.Nodes {
		if s.Nodes[i].NodeID == "w-03" {
			s.Nodes[i].Ready, s.Nodes[i].NotReadyReason = false, "cordoned"
		}
	}
	send(m, tea.WindowSizeMsg{Width: 80, Height: 24}, PollMsg{Seq: 1, Poll: s})
	for _, scroll := range []string{"", "ll", "llll"} {
		send(m, keys(scroll)...)
		v := view(m)
		if !strings.Contains(v, "READY") {
			t.Fatalf("after %q READY is not shown at 80x24:\n%s", scroll, v)
		}
		var line string
		for l := range strings.SplitSeq(v, "\n") {
			if strings.Contains(l, "w-03") {
				line = l
			}
		}
		if !strings.Contains(line, " no") {
			t.Errorf("after %q the cordoned worker's row does not say READY no: %q", scroll, line)
		}
	}
}

// TestHeaderPresenceAndTotals: the header compares live coordinators with
// the expected count and names a missing one in words (issue 38: "1
// healthy, 1 ready" hid it), and shows the cluster's totals.
func TestHeaderPresenceAndTotals(t *testing.T) {
	m := newModel(t, testOptions(newClock()))
	s := fixture(0)
	s.Cluster.Coordinators = apiv1.CoordinatorPresence{Expected: 2, Present: 1, Ready: 1, Missing: []apiv1.MissingCoordinator{{NodeID: "coord-b"}}}
	send(m, tea.WindowSizeMsg{Width: 160, Height: 30}, PollMsg{Seq: 1, Poll: s})
	v := view(m)
	for _, want := range []string{"coordinators 1/2: ", "MISSING coord-b", "resident 189G/384G", "hit 90.0%", "req/s 1.00k"} {
		if !strings.Contains(v, want) {
			t.Errorf("header lacks %q:\n%s", want, v)
		}
	}
	s.Cluster.Coordinators = apiv1.CoordinatorPresence{Expected: 3, Present: 2, Ready: 2, Missing: []apiv1.MissingCoordinator{}}
	send(m, PollMsg{Seq: 2, Poll: s})
	if v := view(m); !strings.Contains(v, "MISSING 1") {
		t.Errorf("header lacks the count of an unnamed missing coordinator:\n%s", v)
	}
}

// TestHeaderMidUpgrade: while more than one build runs the header says
// MID-UPGRADE with the cluster's feature level and the processes per
// version (issue 46: nothing told an operator); one build says nothing.
func TestHeaderMidUpgrade(t *testing.T) {
	m := newModel(t, testOptions(newClock()))
	s := fixture(0)
	s.Cluster.Upgrade = &apiv1.Upgrade{FeatureLevel: 0, HighestLevel: 1, ServerLevel: 1, Mixed: true, Versions: []apiv1.VersionCount{
		{Role: "coordinator", Version: "v1.0.0", FeatureLevel: 0, Count: 1}, {Role: "coordinator", Version: "v1.1.0", FeatureLevel: 1, Count: 1},
		{Role: "worker", Version: "v1.1.0", FeatureLevel: 1, Count: 3}}}
	send(m, tea.WindowSizeMsg{Width: 160, Height: 30}, PollMsg{Seq: 1, Poll: s})
	if v := view(m); !strings.Contains(v, "MID-UPGRADE level 0: v1.0.0 ×1, v1.1.0 ×4") {
		t.Errorf("header lacks the mid-upgrade part:\n%s", v)
	}
	s.Cluster.Upgrade = &apiv1.Upgrade{FeatureLevel: 1, HighestLevel: 1, ServerLevel: 1, Versions: []apiv1.VersionCount{{Role: "worker", Version: "v1.1.0", FeatureLevel: 1, Count: 3}}}
	send(m, PollMsg{Seq: 2, Poll: s})
	if v := view(m); strings.Contains(v, "MID-UPGRADE") {
		t.Errorf("one build runs, yet the header says mid-upgrade:\n%s", v)
	}
}

// TestCoordinatorsPaneAgreement: the coordinators pane shows each
// coordinator's published placement and says in words when one disagrees
// (issue 38: only the answering coordinator's view was shown).
func TestCoordinatorsPaneAgreement(t *testing.T) {
	m := newModel(t, testOptions(newClock()))
	s := fixture(0)
	for i := range s.Nodes {
		if s.Nodes[i].NodeID == "coord-b" {
			s.Nodes[i].PlacementVersion, s.Nodes[i].EligibleWorkers, s.Nodes[i].Agree = "00000000000000bb", 3, "no"
		}
	}
	send(m, tea.WindowSizeMsg{Width: 170, Height: 55}, PollMsg{Seq: 1, Poll: s})
	v := view(m)
	for _, want := range []string{"placement 00000000000000bb, 3 eligible, DISAGREES with coord-a", "answering: revision 4200, placement 9f86d081884c7d65, 4 eligible, agree yes"} {
		if !strings.Contains(v, want) {
			t.Errorf("coordinators pane lacks %q:\n%s", want, v)
		}
	}
}

// TestHealthSortOrder: sorting by health puts unhealthy before unknown,
// as talonctl, the web UI and cluster.HealthStates do (issue 39).
func TestHealthSortOrder(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{"healthy", "degraded"}, {"degraded", "unhealthy"}, {"unhealthy", "unknown"}, {"unknown", "bogus"}} {
		if healthRank(tc.a) >= healthRank(tc.b) {
			t.Errorf("healthRank(%s) = %d, not below healthRank(%s) = %d", tc.a, healthRank(tc.a), tc.b, healthRank(tc.b))
		}
	}
}

// TestHelpNamesEachKeyOnce: the full help lists every key once, so that
// it never tells of one key two different things (S was both "s/S sort
// column" and "S previous sort column").
func TestHelpNamesEachKeyOnce(t *testing.T) {
	for _, width := range []int{0, 100, 40} {
		k := newKeyMap()
		k.width = width
		seen := map[string]string{}
		for _, col := range k.FullHelp() {
			for _, b := range col {
				for _, key := range strings.FieldsFunc(b.Help().Key, func(r rune) bool { return r == '/' || r == ' ' }) {
					if prev, ok := seen[key]; ok {
						t.Errorf("width %d: key %q listed for %q and %q", width, key, prev, b.Help().Desc)
					}
					seen[key] = b.Help().Desc
				}
			}
		}
	}
}

// TestEventsViewWraps: the :events view wraps an event longer than the
// terminal instead of cutting it, and keeps the frame's height.
func TestEventsViewWraps(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	p := fixture(0)
	long := "credential on coord-a's deny list (key compromised on the build host; reissued by the on-call operator at 03:12)"
	for i := range 12 {
		p.Events = append(p.Events, apiv1.Event{Seq: uint64(i + 1), TimeUnixMs: t0.UnixMilli(), Type: "node_revoked", Coordinator: "coord-a",
			Role: "worker", NodeID: fmt.Sprintf("w-%02d", i), New: "revoked", Reason: long})
	}
	send(m, PollMsg{Seq: 1, Poll: p}, tea.WindowSizeMsg{Width: 80, Height: 24})
	for _, r := range ":events" {
		send(m, tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	send(m, tea.KeyPressMsg{Code: tea.KeyEnter})
	v := ansi.Strip(view(m))
	if lines := strings.Split(v, "\n"); len(lines) != 24 {
		t.Errorf("%d lines, want 24:\n%s", len(lines), v)
	}
	body, _, _ := strings.Cut(v[strings.Index(v, "EVENTS of"):], ":events (")
	if strings.Contains(body, "…") {
		t.Errorf("an event is cut:\n%s", v)
	}
	if !strings.Contains(body, "worker/w-11") || !strings.Contains(strings.Join(strings.Fields(body), " "), strings.Join(strings.Fields(long), " ")) {
		t.Errorf("the newest event is not shown whole:\n%s", v)
	}
}

// TestTallTerminalFillsHeight: at 200×50 a short node table leaves its
// room to the events pane (more events), not to blank lines.
func TestTallTerminalFillsHeight(t *testing.T) {
	c := newClock()
	m := newModel(t, testOptions(c))
	p := fixture(0)
	for i := range MaxEvents {
		p.Events = append(p.Events, apiv1.Event{Seq: uint64(i + 1), TimeUnixMs: t0.UnixMilli(), Type: "node_joined", Coordinator: "coord-a",
			Role: "worker", NodeID: fmt.Sprintf("w-%02d", i), New: "healthy"})
	}
	send(m, PollMsg{Seq: 1, Poll: p}, tea.WindowSizeMsg{Width: 200, Height: 50})
	v := ansi.Strip(view(m))
	lines := strings.Split(v, "\n")
	blank := 0
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			blank++
		}
	}
	if len(lines) != 50 || blank > 2 {
		t.Errorf("%d lines, %d blank: want 50 with the room filled:\n%s", len(lines), blank, v)
	}
	if !strings.Contains(v, "worker/w-49") || !strings.Contains(v, "w-06") {
		t.Errorf("the newest event or a node is missing:\n%s", v)
	}
	// Without events to fill it, the room stays, the footer at the bottom.
	p.Events = nil
	send(m, PollMsg{Seq: 2, Poll: p})
	if lines := strings.Split(view(m), "\n"); len(lines) != 50 || !strings.Contains(lines[49], "q quit") {
		t.Errorf("without events: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}
