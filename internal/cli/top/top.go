// Package top implements `talonctl top`, the live cluster view: it runs
// the bubbletea model of package tui and feeds it polls fetched from
// /api/v1 by tea.Cmd functions. The model keeps the last good poll on
// screen, marked STALE, while the API fails.
package top

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/tui"
)

// Fetch timing.
const (
	// minFetchTimeout is the shortest deadline of one fetch (cluster and
	// every node page) unless --timeout is shorter.
	minFetchTimeout = 5 * time.Second
	// onceWidth is the width of a --once frame when stdout is not a
	// terminal and COLUMNS is unset: wide enough for every column.
	onceWidth = 160
)

// TopOptions are the parsed flags of `talonctl top`.
type TopOptions struct {
	IO         *cmdutil.IOStreams
	Connection func() (*cmdutil.Connection, error)
	Getenv     func(string) string
	// Environ is the process environment the program reads (TERM); nil
	// is the real one.
	Environ []string
	Now     func() time.Time

	Refresh        time.Duration
	UnhealthyAfter time.Duration
	Once           bool
	AllowStale     bool

	// programOptions are added to the bubbletea program's (tests give
	// input and output); onExit receives the final model.
	programOptions []tea.ProgramOption
	onExit         func(*tui.Model)
}

// NewCmdTop returns the command; runF replaces its run function in tests.
func NewCmdTop(f *cmdutil.Factory, runF func(*TopOptions) error) *cobra.Command {
	opts := &TopOptions{IO: &f.IO, Connection: f.Connection, Getenv: f.Getenv, Environ: f.Environ, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Watch the cluster live: nodes, health, heartbeats and cache rates",
		Long: `Show the cluster live, refreshed every --refresh: the answering coordinator,
the store's backend and health, the snapshot's revision, observation time and
PlacementVersion, the nodes counted by role and health, and a table of every
node with its health, readiness, heartbeat age, version and address; for
workers the rates between the last two heartbeats (requests/s, hit ratio,
bytes served/s, evictions/s) and resident bytes over capacity.

When the API cannot be reached, times out or answers 503, the last good
snapshot stays on screen, dimmed, under a STALE banner that gives its
observation time and age, the error and when the next attempt is due
(with jitter, never more than the refresh interval apart, so that top is
current within one interval of the API's return; r retries at once). The banner
goes when fresh data arrives. HB AGE is how long the node has not been
heard of: its last accepted heartbeat, which no mark (late, cordon) moves,
raised by renewals the answering coordinator accepted or the store reported
(on etcd, a renewal through another coordinator is known within about
unhealthy-after), so it never understates a silence. A row the store marked
late, or whose HB AGE is above unhealthy-after plus a heartbeat interval, is
marked with ! even while the snapshot is fresh.

On a narrow terminal the columns that do not fit leave in this order:
ADDRESS, VERSION, HB AGE, RESIDENT/CAP, then the rates last; the footer
counts the hidden ones, and left and right (h, l) scroll through them with
ROLE, NODE, HEALTH and READY pinned. Sizes, rates and hit ratios are
formatted as in talonctl nodes list. Esc or q close the help.

Keys: / filter, s and S sort column (Shift+N, H, A, V, R, B sort by node,
health, age, version, req/s, bytes/s at once), o reverse order, c and w show
or hide coordinators and workers, u problem nodes only, enter node detail,
left and right scroll columns, : switch the view (:nodes, :events,
:coordinators, any prefix), r refresh now, ? all keys, q quit.

top needs a terminal. --once prints one frame of every node to stdout and
exits, with or without a terminal. Rates need two counter samples of each
worker, and counters are written with a worker's status, which lease
renewals do not write: --once polls every heartbeat interval until every
heartbeating worker has a second status, at most the cluster's status
interval and one heartbeat interval (2 minutes at most), so that it shows
rates.

A terminal of 40 rows or more shows the answering coordinator's last events
(joins, health and readiness changes) below the table; one of 160 columns
and 50 rows or more also shows the coordinators as their records show them,
with the answering one's own view (talonctl coordinators list asks each).`,
		Example: `  talonctl top
  talonctl top --refresh 5s
  talonctl top --once | less -S`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Refresh < tui.MinRefresh {
				return cmdutil.UsageErrorf("--refresh %s: must be at least %s", opts.Refresh, tui.MinRefresh)
			}
			if opts.UnhealthyAfter <= 0 {
				return cmdutil.UsageErrorf("--unhealthy-after %s: must be positive", opts.UnhealthyAfter)
			}
			if !opts.Once && !opts.IO.IsStdoutTTY() {
				return cmdutil.UsageErrorf("stdout is not a terminal: talonctl top draws a live view and needs one; use --once to print one frame")
			}
			if runF != nil {
				return runF(opts)
			}
			return topRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&opts.Refresh, "refresh", tui.DefaultRefresh, "interval between refreshes (at least "+tui.MinRefresh.String()+")")
	fl.BoolVar(&opts.Once, "once", false, "print one frame of every node and exit (works without a terminal)")
	fl.DurationVar(&opts.UnhealthyAfter, "unhealthy-after", tui.DefaultUnhealthyAfter,
		"mark rows whose heartbeat is older than this, when the server does not give the cluster's unhealthy-after time")
	cmdutil.AllowStaleFlag(cmd, &opts.AllowStale)
	return cmd
}

func topRun(ctx context.Context, opts *TopOptions) error {
	conn, err := opts.Connection()
	if err != nil {
		return err
	}
	timeout := fetchTimeout(conn.Timeout, opts.Refresh)
	// Each server gets its share of the fetch's time, so that a hung first
	// server leaves time to fail over to the next.
	client, rec, err := newClient(conn, max(timeout/time.Duration(max(len(conn.Servers), 1)), time.Second))
	if err != nil {
		return err
	}
	defer rec.CloseIdleConnections()

	// The model's styles are downsampled to this profile by whatever
	// writes its frames: NoTTY (no escape sequences) off a terminal, Ascii
	// (bold, no colour) under NO_COLOR.
	profile := colorprofile.NoTTY
	switch {
	case opts.IO.ColorEnabled():
		profile = opts.IO.ColorProfile
	case opts.IO.IsStdoutTTY():
		profile = colorprofile.Ascii
	}
	mopts := tui.Options{Refresh: opts.Refresh, UnhealthyAfter: opts.UnhealthyAfter, Now: opts.Now}
	call := cmdutil.CallOptions(opts.AllowStale)
	if opts.Once {
		if !opts.IO.ColorEnabled() {
			profile = colorprofile.NoTTY // one printed frame: plain text
		}
		return onceRun(ctx, opts, mopts, profile, func(ctx context.Context) (*tui.Poll, error) {
			return fetch(ctx, client, timeout, call)
		})
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	mopts.Done = done
	mopts.Fetch = func(seq uint64) tea.Cmd {
		return func() tea.Msg {
			poll, err := fetch(ctx, client, timeout, call)
			if err != nil {
				return tui.FetchErrorMsg{Seq: seq, Err: err}
			}
			return tui.PollMsg{Seq: seq, Poll: poll}
		}
	}
	m, err := tui.New(mopts)
	if err != nil {
		return cmdutil.UsageError(err)
	}
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(opts.IO.In), tea.WithOutput(opts.IO.Out), tea.WithColorProfile(profile)}
	if opts.Environ != nil {
		popts = append(popts, tea.WithEnvironment(opts.Environ))
	}
	p := tea.NewProgram(m, append(popts, opts.programOptions...)...)
	final, err := p.Run()
	close(done) // pending timers return
	cancel()    // fetches in flight return
	if fm, ok := final.(*tui.Model); ok && opts.onExit != nil {
		opts.onExit(fm)
	}
	switch {
	case err == nil, errors.Is(err, tea.ErrInterrupted):
		return nil
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil && !errors.Is(err, tea.ErrProgramPanic):
		return nil // the command's context ended (signal)
	}
	return fmt.Errorf("top: %w", err)
}

// onceRun prints one frame of every node. A failed fetch prints nothing
// and returns the error, which sets the exit code.
func onceRun(ctx context.Context, opts *TopOptions, mopts tui.Options, profile colorprofile.Profile, get func(context.Context) (*tui.Poll, error)) error {
	m, err := tui.New(mopts)
	if err != nil {
		return cmdutil.UsageError(err)
	}
	poll, err := get(ctx)
	if err != nil {
		return err
	}
	m.Update(tea.WindowSizeMsg{Width: frameWidth(opts)})
	m.Update(tui.PollMsg{Seq: 1, Poll: poll}) // the timer it arms is never run
	// Rates need two counter samples of each worker, and counters move
	// with a worker's status, which lease renewals do not write: poll
	// every heartbeat interval until every worker that heartbeats has a
	// second status (at most one status interval and a heartbeat). A
	// failed later fetch prints what there is, rates as -.
	step, deadline := onceSampleWait(poll), time.Now().Add(onceRatesWait(poll))
	for seq := uint64(2); ; seq++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(step):
		}
		next, err := get(ctx)
		if err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "talonctl: warning: a later sample failed, rates may not be shown: %s\n", cmdutil.Message(err))
			break
		}
		m.Update(tui.PollMsg{Seq: seq, Poll: next})
		if resampled(poll, next) || !time.Now().Add(step).Before(deadline) {
			break
		}
	}
	return m.WriteAll(opts.IO.Out, profile)
}

// Bounds of the wait between --once's samples, and of them all.
const (
	minOnceWait      = 200 * time.Millisecond
	maxOnceWait      = 10 * time.Second
	maxOnceRatesWait = 2 * time.Minute
)

// onceSampleWait is one heartbeat interval of the cluster (and a little,
// so that every worker heartbeat once in between), within bounds.
func onceSampleWait(p *tui.Poll) time.Duration {
	hb := time.Duration(p.Cluster.Timing.HeartbeatIntervalMs) * time.Millisecond
	if hb <= 0 {
		hb = 5 * time.Second
	}
	return min(max(hb+hb/10, minOnceWait), maxOnceWait)
}

// onceRatesWait bounds --once's sampling: one status interval (the
// longest a heartbeating worker's counters stay unwritten) and one sample
// wait, within maxOnceRatesWait.
func onceRatesWait(p *tui.Poll) time.Duration {
	status := time.Duration(p.Cluster.Timing.StatusIntervalMs) * time.Millisecond
	return min(status+onceSampleWait(p), maxOnceRatesWait)
}

// resampled reports whether every worker of next that heartbeat since
// first (same incarnation) also carries counters written since first: the
// two samples the rates need. A worker that did not heartbeat (stopped,
// late) is not waited for.
func resampled(first, next *tui.Poll) bool {
	before := make(map[string]apiv1.Node, len(first.Nodes))
	for _, n := range first.Nodes {
		before[n.NodeID] = n
	}
	sampleAt := func(n apiv1.Node) int64 { return cmp.Or(n.StatusAtUnixMs, n.UpdatedAtUnixMs) }
	for _, n := range next.Nodes {
		b, ok := before[n.NodeID]
		if n.Role != "worker" || !ok || b.IncarnationID != n.IncarnationID || n.HeartbeatAtUnixMs <= b.HeartbeatAtUnixMs {
			continue
		}
		if sampleAt(n) <= sampleAt(b) {
			return false
		}
	}
	return true
}

// frameWidth is the terminal's width, else COLUMNS, else onceWidth.
func frameWidth(opts *TopOptions) int {
	if f, ok := opts.IO.Out.(*os.File); ok && opts.IO.IsStdoutTTY() {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	if opts.Getenv != nil {
		if w, err := strconv.Atoi(opts.Getenv("COLUMNS")); err == nil && w > 0 {
			return w
		}
	}
	return onceWidth
}

// fetchTimeout bounds one fetch: twice the refresh interval, at least
// minFetchTimeout, at most the connection's --timeout.
func fetchTimeout(connTimeout, refresh time.Duration) time.Duration {
	return min(connTimeout, max(minFetchTimeout, 2*refresh))
}

// fetch reads one poll: the cluster summary, then every node.
func fetch(ctx context.Context, client *apiv1.Client, timeout time.Duration, call []apiv1.CallOption) (*tui.Poll, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ans := &answered{}
	ctx = context.WithValue(ctx, answeredKey{}, ans)
	c, err := client.Cluster(ctx, call...)
	if err == nil {
		var nodes *apiv1.NodeList
		if nodes, err = client.AllNodes(ctx, apiv1.NodeFilter{}, call...); err == nil {
			p := &tui.Poll{Cluster: *c, Nodes: nodes.Items, Server: ans.get()}
			// The events pane is extra: an older coordinator without
			// /api/v1/events (404) or a failure leaves it empty.
			// The newest MaxEvents: the first, one-event page says how
			// many are kept.
			if head, err := client.Events(ctx, apiv1.EventFilter{Limit: 1}); err == nil && head.LastSeq > 0 {
				after := uint64(0)
				if head.LastSeq > tui.MaxEvents {
					after = head.LastSeq - tui.MaxEvents
				}
				if evs, err := client.Events(ctx, apiv1.EventFilter{After: after, Limit: tui.MaxEvents}); err == nil {
					p.Events = evs.Items
				}
			}
			return p, nil
		}
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return nil, fmt.Errorf("no complete answer within %s: %w", timeout, err)
	}
	return nil, err
}

// answeredKey is the context key of the *answered of one fetch.
type answeredKey struct{}

// answered records the base URL of the first server that answered 200
// within one fetch.
type answered struct {
	mu   sync.Mutex // guards base
	base string
}

func (a *answered) set(base string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.base == "" {
		a.base = base
	}
}

func (a *answered) get() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.base
}

// recorder is the client's transport: it notes which base URL answered,
// for the header, since the client fails over between servers silently.
type recorder struct {
	*http.Transport
	bases []string // the client's normalized base URLs; set before the first request
}

// RoundTrip sends req and records its server in the fetch's answered.
func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.Transport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if a, ok := req.Context().Value(answeredKey{}).(*answered); ok {
		u := req.URL.String()
		for _, b := range r.bases {
			if strings.HasPrefix(u, b+"/") {
				a.set(b)
				break
			}
		}
	}
	return resp, nil
}

// newClient builds the /api/v1 client of conn (cmdutil.Connection's, one
// way to build it) over a transport that records the answering server;
// attempt bounds one attempt against one server.
func newClient(conn *cmdutil.Connection, attempt time.Duration) (*apiv1.Client, *recorder, error) {
	var rec *recorder
	client, _, err := conn.NewClientVia(attempt, 0, func(tr *http.Transport) http.RoundTripper {
		rec = &recorder{Transport: tr}
		return rec
	})
	if err != nil {
		return nil, nil, err
	}
	rec.bases = client.BaseURLs()
	return client, rec, nil
}
