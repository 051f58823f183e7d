// Package eventtable gathers the events of every coordinator and renders
// them for `talonctl events` and `talonctl nodes describe`.
package eventtable

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Result is the events gathered from every coordinator that answered.
type Result struct {
	Events []apiv1.Event
	// Failed lists the coordinators that did not answer, with why.
	Failed []string
	// Last is each coordinator's newest sequence number and incarnation,
	// by endpoint index, for a watch to continue from.
	Last []Cursor
}

// Cursor is where a watch of one coordinator continues.
type Cursor struct {
	Seq         uint64
	Incarnation string
	OK          bool
}

// Gather reads every endpoint's events matching f (all pages, up to
// limit events per coordinator; 0 means apiv1.MaxEventLimit) and merges
// them by time, oldest first.
func Gather(ctx context.Context, eps []*cmdutil.Endpoint, f apiv1.EventFilter, limit int) Result {
	if limit <= 0 {
		limit = apiv1.MaxEventLimit
	}
	per := make([][]apiv1.Event, len(eps))
	errs := make([]error, len(eps))
	last := make([]Cursor, len(eps))
	cmdutil.Each(eps, func(i int, ep *cmdutil.Endpoint) {
		q := f
		q.Limit = min(limit, apiv1.MaxEventLimit)
		for len(per[i]) < limit {
			page, err := ep.Client.Events(ctx, q)
			if err != nil {
				errs[i] = err
				return
			}
			if ep.NodeID == "" {
				ep.NodeID = page.Coordinator
			}
			per[i] = append(per[i], page.Items...)
			last[i] = Cursor{Seq: page.LastSeq, Incarnation: page.Incarnation, OK: true}
			if page.Continue == "" || len(page.Items) == 0 {
				break
			}
			q.After = page.Items[len(page.Items)-1].Seq
		}
		if len(per[i]) > limit {
			per[i] = per[i][len(per[i])-limit:]
		}
	})
	var r Result
	r.Last = last
	seen := map[string]bool{}
	for i, evs := range per {
		if errs[i] != nil {
			msg := cmdutil.Message(errs[i])
			if cmdutil.IsUnreachable(errs[i]) {
				msg = cmdutil.NoAnswer(errs[i])
			}
			r.Failed = append(r.Failed, eps[i].Name()+": "+msg)
			continue
		}
		// A list holds node events other coordinators wrote: the endpoint
		// is the coordinator that answered.
		if id := eps[i].NodeID; id != "" && seen[id] {
			continue // one coordinator reached at two addresses
		} else if id != "" {
			seen[id] = true
		}
		r.Events = append(r.Events, evs...)
	}
	Sort(r.Events)
	r.Events = Dedup(r.Events)
	return r
}

// Dedup keeps the first of the events that share an ID (a node event
// every coordinator lists); events without an ID are all kept.
func Dedup(evs []apiv1.Event) []apiv1.Event {
	ids := map[string]bool{}
	out := evs[:0]
	for _, e := range evs {
		if e.ID != "" {
			if ids[e.ID] {
				continue
			}
			ids[e.ID] = true
		}
		out = append(out, e)
	}
	return out
}

// Sort orders events by time, then coordinator, then sequence.
func Sort(evs []apiv1.Event) {
	slices.SortStableFunc(evs, func(a, b apiv1.Event) int {
		return cmp.Or(cmp.Compare(a.TimeUnixMs, b.TimeUnixMs), strings.Compare(a.Coordinator, b.Coordinator), cmp.Compare(a.Seq, b.Seq))
	})
}

// Headers are the table's columns, the same on a terminal and in a pipe.
var Headers = []string{"TIME", "COORDINATOR", "TYPE", "NODE", "CHANGE", "REASON"}

// Types are the event types coordinators report (talonctl events --type):
// apiv1.EventTypes, generated from the store's node event.
var Types = apiv1.EventTypes

// Printer renders events as a table.
type Printer struct {
	TTY       bool
	NoHeaders bool
	Colors    *cmdutil.ColorScheme
	// Now is the time ages are measured against on a terminal.
	Now time.Time
	// NoNode leaves out the NODE column (describe, where it is one node).
	NoNode bool
	// Clock shows the time of day instead of the age on a terminal: a
	// watch's rows, which would all read "0ms ago".
	Clock bool
	// Stream says that rows will follow the first table one by one (a
	// watch): the table starts with columns wide enough for every
	// timestamp, every change value and the names in Coordinators, so
	// that the rows line up with it and with each other when piped too.
	Stream bool
	// Coordinators are the names of the coordinators whose events will be
	// printed (with Stream).
	Coordinators []string
	// widths are the column widths printed so far, so that the rows a
	// watch prints one by one line up with the table above them.
	widths []int
}

// Write renders evs.
func (p *Printer) Write(w io.Writer, evs []apiv1.Event) error {
	t := cmdutil.NewTable(p.headers()...)
	t.MinWidths = p.widths
	if t.MinWidths == nil {
		t.MinWidths = p.minWidths()
	}
	for _, e := range evs {
		t.AddRow(p.Row(e)...)
	}
	var b strings.Builder
	if err := t.Render(&b, p.NoHeaders); err != nil {
		return err
	}
	p.widths = t.Widths()
	_, err := io.WriteString(w, b.String())
	return err
}

// minWidths are the widths a table of events starts with, wide enough
// for the usual cells (every event type, a health or readiness change), so
// that the rows a watch adds one by one stay lined up with the first.
func (p *Printer) minWidths() []int {
	longest := 0
	for _, t := range Types {
		longest = max(longest, len(t))
	}
	w := []int{10, 12, longest, 24, len("not_ready -> ready") + 2, 0}
	if p.Stream {
		if !p.TTY {
			// Timestamp drops a zero millisecond: reserve the longer form.
			w[0] = len("2006-01-02T15:04:05.000Z")
		}
		for _, c := range p.Coordinators {
			w[1] = max(w[1], len(c))
		}
		// The longest change: two PlacementVersions.
		w[4] = max(w[4], len("0123456789abcdef -> 0123456789abcdef"))
	}
	if p.NoNode {
		w = slices.Delete(w, 3, 4)
	}
	return w
}

func (p *Printer) headers() []string {
	if p.NoNode {
		return slices.DeleteFunc(slices.Clone(Headers), func(h string) bool { return h == "NODE" })
	}
	return Headers
}

// Row is one event's cells.
func (p *Printer) Row(e apiv1.Event) []string {
	when := cmdutil.Timestamp(e.TimeUnixMs)
	switch {
	case p.TTY && p.Clock:
		when = time.UnixMilli(e.TimeUnixMs).In(p.Now.Location()).Format(time.TimeOnly)
	case p.TTY:
		when = cmdutil.Duration(p.Now.Sub(time.UnixMilli(e.TimeUnixMs))) + " ago"
	}
	node := "-"
	if e.NodeID != "" {
		node = e.Role + "/" + e.NodeID
	}
	change := "-"
	switch {
	case e.Old != "" && e.New != "":
		change = e.Old + " -> " + e.New
	case e.New != "":
		change = e.New
	}
	typ := e.Type
	if p.Colors != nil && warning(e.Type, e.New) {
		typ = p.Colors.Yellow(typ)
	}
	reason := e.Reason
	if reason == "" {
		reason = "-"
	}
	cells := []string{when, e.Coordinator, typ, node, change, reason}
	if p.NoNode {
		cells = slices.Delete(cells, 3, 4)
	}
	return cells
}

// warning reports whether an event is bad news (shown in yellow).
func warning(typ, now string) bool {
	switch typ {
	case "node_expired_or_removed", "coordinator_unready", "store_unreachable", "events_dropped", "node_cordoned", "node_revoked":
		return true
	case "node_health_changed":
		return now != "healthy"
	case "node_readiness_changed":
		return now != "ready"
	}
	return false
}

// WarnFailed tells ErrOut which coordinators did not answer.
func WarnFailed(w io.Writer, failed []string) {
	for _, f := range failed {
		fmt.Fprintf(w, "talonctl: warning: no events from %s\n", f)
	}
}

// maxSeen bounds the IDs a Seen remembers: a few coordinators' lists.
const maxSeen = 8 * apiv1.MaxEventLimit

// Seen remembers the IDs of node events printed, so that a watch prints
// each once though every coordinator lists it.
type Seen struct{ ids map[string]bool }

// NewSeen returns a Seen that has seen evs.
func NewSeen(evs []apiv1.Event) *Seen {
	s := &Seen{ids: map[string]bool{}}
	for _, e := range evs {
		s.First(e)
	}
	return s
}

// First reports whether e is seen for the first time (always true for an
// event without an ID) and remembers it.
func (s *Seen) First(e apiv1.Event) bool {
	if e.ID == "" {
		return true
	}
	if s.ids[e.ID] {
		return false
	}
	if len(s.ids) >= maxSeen {
		clear(s.ids) // bounded: an old event seen again prints again
	}
	s.ids[e.ID] = true
	return true
}

// Filter returns the events of evs seen for the first time.
func (s *Seen) Filter(evs []apiv1.Event) []apiv1.Event {
	var out []apiv1.Event
	for _, e := range evs {
		if s.First(e) {
			out = append(out, e)
		}
	}
	return out
}

// Folded is an event with the repeats Coalesce folded into it.
type Folded struct {
	apiv1.Event
	// Count is how many times it occurred (1: once); FirstUnixMs is the
	// first occurrence's time (Event.TimeUnixMs is the last's).
	Count       int
	FirstUnixMs int64
}

// Coalesce folds the repeats of an event into its last occurrence, as
// Kubernetes Events do: occurrences of the same type about the same node
// with the same change and reason, whichever coordinator observed them,
// become one row that counts them, so that a flapping worker is one line
// with its count, not hundreds. Each occurrence stays in the log (its own
// ID); only the table folds them. Rows are in the order of their last
// occurrence; evs must be sorted by time (Sort).
func Coalesce(evs []apiv1.Event) []Folded {
	type key struct{ typ, role, node, old, new, reason string }
	at := map[key]int{}
	var out []Folded
	for _, e := range evs {
		k := key{e.Type, e.Role, e.NodeID, e.Old, e.New, e.Reason}
		if i, ok := at[k]; ok {
			f := out[i]
			f.Event, f.Count = e, f.Count+1
			out[i] = Folded{} // moved to the end: the order of last occurrences
			at[k] = len(out)
			out = append(out, f)
			continue
		}
		at[k] = len(out)
		out = append(out, Folded{Event: e, Count: 1, FirstUnixMs: e.TimeUnixMs})
	}
	return slices.DeleteFunc(out, func(f Folded) bool { return f.Count == 0 })
}

// WriteFolded renders folded events: a repeated one says how many times
// and over how long after its reason ("(x3 over 5m)").
func (p *Printer) WriteFolded(w io.Writer, fs []Folded) error {
	evs := make([]apiv1.Event, len(fs))
	for i, f := range fs {
		evs[i] = f.Event
		if f.Count > 1 {
			over := cmdutil.Duration(time.Duration(f.TimeUnixMs-f.FirstUnixMs) * time.Millisecond)
			suffix := fmt.Sprintf("(x%d over %s)", f.Count, over)
			if evs[i].Reason == "" {
				evs[i].Reason = suffix
			} else {
				evs[i].Reason += " " + suffix
			}
		}
	}
	return p.Write(w, evs)
}
