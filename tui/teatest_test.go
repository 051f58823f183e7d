package tui

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
)

// Golden tests run the model in a real bubbletea program (teatest) at a
// fixed terminal size, with the fixed clock and the Ascii colour profile,
// and compare the final frame with testdata/TestGolden/<case>.golden.
// Regenerate with: go test ./tui -run TestGolden -update
//
// The frame compared is the final model's View rather than the raw byte
// stream the program wrote: the stream depends on how the renderer's
// frame ticks fell (bubbletea v2 redraws only the cells that changed), the
// frame does not. For the same reason a step waits on the frame the model
// drew after its last Update (probe), not on the byte stream.

const (
	goldenWidth  = 140
	goldenHeight = 24
)

// scene drives one program: it sends messages and waits until the
// program has rendered each, so that clock changes between steps are
// ordered with the model's reads of the clock.
type scene struct {
	t  *testing.T
	tm *teatest.TestModel
	c  *testsupport.FakeClock
	p  *probe
}

// probe is the program's model: it records the plain frame after every
// Update, for the test goroutine to wait on.
type probe struct {
	*Model
	mu    sync.Mutex // guards frame
	frame string
}

func (p *probe) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := p.Model.Update(msg)
	f := view(p.Model)
	p.mu.Lock()
	p.frame = f
	p.mu.Unlock()
	return p, cmd
}

func (p *probe) lastFrame() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frame
}

func newScene(t *testing.T) *scene {
	t.Helper()
	return newSceneSize(t, goldenWidth, goldenHeight)
}

func newSceneSize(t *testing.T, w, h int) *scene {
	t.Helper()
	c := newClock()
	p := &probe{Model: newModel(t, testOptions(c))}
	tm := teatest.NewTestModel(t, p, teatest.WithInitialTermSize(w, h))
	return &scene{t: t, tm: tm, c: c, p: p}
}

// step sends msgs and waits until the model's frame shows marker.
func (s *scene) step(marker string, msgs ...tea.Msg) {
	s.t.Helper()
	for _, msg := range msgs {
		s.tm.Send(msg)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(s.p.lastFrame(), marker) {
		if time.Now().After(deadline) {
			s.t.Fatalf("frame lacks %q after 5s:\n%s", marker, s.p.lastFrame())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finish quits the program and compares its final frame with the golden
// file.
func (s *scene) finish() *Model {
	s.t.Helper()
	if err := s.tm.Quit(); err != nil {
		s.t.Fatal(err)
	}
	m := s.tm.FinalModel(s.t, teatest.WithFinalTimeout(5*time.Second)).(*probe).Model
	golden.RequireEqual(s.t, []byte(view(m)))
	return m
}

// healthy brings the scene to two fresh polls, two seconds apart, so
// that rates are known.
func (s *scene) healthy() {
	s.step("revision 4200", PollMsg{Seq: 1, Poll: fixture(0)})
	s.c.Advance(2 * time.Second)
	s.step("revision 4201", PollMsg{Seq: 2, Poll: fixture(1)})
}

// failing makes the two fetches after healthy fail: the coordinator is
// unreachable, then answers 503.
func (s *scene) failing() {
	s.c.Advance(3 * time.Second)
	s.step("1 failed attempt", FetchErrorMsg{Seq: 3, Err: fmt.Errorf(
		`%w: GET /api/v1/cluster: Get "https://coord-a.talon.internal:9090/api/v1/cluster": dial tcp 10.0.0.1:9090: connect: connection refused`,
		apiv1.ErrUnavailable)})
	s.c.Advance(2 * time.Second)
	s.step("2 failed attempts", FetchErrorMsg{Seq: 4, Err: &apiv1.APIError{
		Server: "https://coord-b.talon.internal:9090", HTTPStatus: http.StatusServiceUnavailable,
		Code: apiv1.CodeNotReady, Message: "no current cluster snapshot: store unavailable", Retryable: true,
	}})
	s.c.Advance(time.Second)
}

// columnHeader is the table's column header line of a screen.
func columnHeader(screen string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "ROLE") && strings.Contains(l, "NODE") {
			return l
		}
	}
	return ""
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w, h  int // terminal size; 0 is goldenWidth × goldenHeight
		play  func(s *scene)
		check func(t *testing.T, m *Model)
	}{
		{
			// A common terminal: the rate columns stay, VERSION and
			// ADDRESS (then VERSION, HB AGE, RESIDENT/CAP) leave first;
			// READY is pinned (issue 38).
			name: "narrow_80x24", w: 80, h: 24,
			play: func(s *scene) { s.healthy() },
			check: func(t *testing.T, m *Model) {
				header := columnHeader(view(m))
				v := view(m)
				for _, want := range []string{"observed 0.5s ago", "? help", "q quit"} {
					if !strings.Contains(v, want) {
						t.Errorf("80 columns: the screen lacks %q:\n%s", want, v)
					}
				}
				for _, c := range []string{"ROLE", "NODE", "HEALTH", "READY", "REQ/S", "HIT%", "BYTES/S", "EVICT/S"} {
					if !strings.Contains(header, c) {
						t.Errorf("80 columns: header lacks %s: %q", c, header)
					}
				}
				for _, c := range []string{"VERSION", "ADDRESS"} {
					if strings.Contains(header, c) {
						t.Errorf("80 columns: header shows %s before the rates fit: %q", c, header)
					}
				}
			},
		},
		{
			// Scrolling right shows the columns that left, ROLE, NODE,
			// HEALTH and READY pinned.
			name: "narrow_scrolled_right", w: 80, h: 24,
			play: func(s *scene) {
				s.healthy()
				s.step("VERSION", keys("l")...)
			},
			check: func(t *testing.T, m *Model) {
				header := columnHeader(view(m))
				if !strings.HasPrefix(strings.TrimSpace(header), "ROLE") || !strings.Contains(header, "NODE") || !strings.Contains(header, "HEALTH") || !strings.Contains(header, "VERSION") {
					t.Errorf("scrolled header: %q", header)
				}
			},
		},
		{
			name: "healthy",
			play: func(s *scene) {
				s.healthy()
				s.c.Advance(500 * time.Millisecond)
			},
			check: func(t *testing.T, m *Model) {
				if m.Stale() {
					t.Error("healthy cluster shown as stale")
				}
			},
		},
		{
			name: "stale",
			play: func(s *scene) {
				s.healthy()
				s.failing()
			},
			check: func(t *testing.T, m *Model) {
				if !m.Stale() || m.Last().Cluster.Revision != "4201" || m.Failures() != 2 {
					t.Errorf("stale %v, revision %s, failures %d; want stale with revision 4201 after 2 failures",
						m.Stale(), m.Last().Cluster.Revision, m.Failures())
				}
			},
		},
		{
			name: "recovery",
			play: func(s *scene) {
				s.healthy()
				s.failing()
				s.c.Advance(3 * time.Second)
				s.step("revision 4202", PollMsg{Seq: 5, Poll: fixture(2)})
				s.c.Advance(time.Second)
			},
			check: func(t *testing.T, m *Model) {
				if m.Stale() || m.Failures() != 0 {
					t.Errorf("after recovery: stale %v, failures %d", m.Stale(), m.Failures())
				}
			},
		},
		{
			name: "no_data",
			play: func(s *scene) {
				s.step("NO DATA", FetchErrorMsg{Seq: 1, Err: fmt.Errorf(
					`%w: GET /api/v1/cluster: context deadline exceeded`, apiv1.ErrUnavailable)})
			},
		},
		{
			name: "unhealthy_node",
			play: func(s *scene) {
				s.healthy()
				s.step("problem nodes only", keys("u")...)
			},
		},
		{
			name: "unhealthy_node_detail",
			play: func(s *scene) {
				s.healthy()
				s.step("problem nodes only", keys("u")...)
				s.step("LATE", keys("j\n")...)
			},
		},
		{
			name: "filter",
			play: func(s *scene) {
				s.healthy()
				s.step("0 of 8 nodes", keys("/coordx")...)
				s.step(`filter "coord"`, keys("\b\n")...)
			},
		},
		{
			name: "filter_typing",
			play: func(s *scene) {
				s.healthy()
				s.step("/w-0█", keys("/w-0")...)
			},
		},
		{
			name: "sort_by_requests",
			play: func(s *scene) {
				s.healthy()
				s.step("sort requests/s ▼", keys("sssssss")...)
			},
		},
		{
			name: "sort_by_age_ascending_workers_only",
			play: func(s *scene) {
				s.healthy()
				s.step("coordinators hidden", keys("ssssco")...)
			},
		},
		{
			name: "full_help",
			play: func(s *scene) {
				s.healthy()
				s.step("previous sort column", keys("?")...)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t)
			if tc.w > 0 {
				s = newSceneSize(t, tc.w, tc.h)
			}
			tc.play(s)
			m := s.finish()
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}
