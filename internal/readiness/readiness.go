// Package readiness is the one readiness tracker both runtimes use, in the
// shape of tailscale's health.Tracker: components set and clear the
// conditions that make a process unready, the tracker reports them in one
// fixed order, and everything that shows readiness (/readyz, the
// talon_ready gauge, the systemd notification, the own record's
// notReadyReason) reads the same report.
//
// A condition is either set and cleared by the component that owns it
// (Set, Clear: draining, a cordon, a failing cache directory) or, when
// it follows from state that moves on its own, such as a hold that ends
// with time, probed on every report (Probe). Either way the reason is
// written once, here or by its owner, never assembled twice.
//
// The tracker logs each change of readiness once, with its cause (the
// first time the process is ready, every ready-to-unready change, every
// return to ready), and hands it to OnChange, so an outage costs two log
// lines however often readiness is read.
//
// Concurrency: a Tracker is safe for concurrent use. Probes run under the
// tracker's lock and must not call back into it.
package readiness

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Condition names one reason a process may be unready.
type Condition string

// The conditions both runtimes share.
const (
	// Draining: the process is shutting down.
	Draining Condition = "draining"
	// OwnRecord: the process's own record is not (yet) accepted.
	OwnRecord Condition = "own_record"
)

// DrainingReason is Draining's reason.
const DrainingReason = "draining: shutting down"

// OwnRecordReason is the reason OwnRecord holds: refused by the store
// (refusal set), or not accepted yet (warming says why; err, if any, is
// the last attempt's error). It is "" once the record is accepted.
func OwnRecordReason(registered bool, refusal, warming string, err error) string {
	switch {
	case refusal != "":
		return "own record refused: " + refusal
	case registered:
		return ""
	case err != nil:
		return warming + ": " + err.Error()
	}
	return warming
}

// Report is a process's readiness with the reasons it is not ready, in
// the tracker's order.
type Report struct {
	Ready   bool
	Reasons []string
}

// Change is one change of readiness, as OnChange receives it.
type Change struct {
	Report
	// First: the process had never been ready before this report.
	First bool
	// Was is the reasons the process was unready for, when it turns
	// ready again.
	Was string
}

// Options configures a tracker.
type Options struct {
	// Role names the process in log lines ("coordinator").
	Role string
	// Order is every condition, in the order reports list them.
	// Conditions not listed are reported after them, by name.
	Order []Condition
	// Logger receives the changes; nil discards them.
	Logger *slog.Logger
	// OnChange, if set, receives each change after it is logged, under
	// the tracker's lock.
	OnChange func(Change)
}

// Tracker holds a process's readiness conditions.
type Tracker struct {
	opts Options
	rank map[Condition]int

	mu     sync.Mutex // guards the fields below
	set    map[Condition]string
	probes map[Condition]func() []string
	known  bool // a report was noted
	ready  bool
	everUp bool   // ready at least once: warming up is no outage
	was    string // the reasons of the last report noted
}

// New returns a tracker with no condition set.
func New(opts Options) *Tracker {
	rank := make(map[Condition]int, len(opts.Order))
	for i, c := range opts.Order {
		rank[c] = i
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{opts: opts, rank: rank, set: map[Condition]string{}, probes: map[Condition]func() []string{}}
}

// Set makes c hold with reason; an empty reason clears it.
func (t *Tracker) Set(c Condition, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if reason == "" {
		delete(t.set, c)
		return
	}
	t.set[c] = reason
}

// Clear ends c.
func (t *Tracker) Clear(c Condition) { t.Set(c, "") }

// Probe makes c hold whenever probe returns a reason, asked on every
// report.
func (t *Tracker) Probe(c Condition, probe func() string) {
	t.ProbeAll(c, func() []string {
		if r := probe(); r != "" {
			return []string{r}
		}
		return nil
	})
}

// ProbeAll is Probe for a condition that may hold for several reasons
// at once (a store's alarms), reported in probe's order.
func (t *Tracker) ProbeAll(c Condition, probe func() []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.probes[c] = probe
}

// Report returns the readiness now and notes a change of it.
func (t *Tracker) Report() Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	type held struct {
		c      Condition
		reason string
	}
	var hs []held
	for c, r := range t.set {
		hs = append(hs, held{c, r})
	}
	for c, p := range t.probes {
		for _, r := range p() {
			hs = append(hs, held{c, r})
		}
	}
	slices.SortStableFunc(hs, func(a, b held) int {
		ra, oka := t.rank[a.c]
		rb, okb := t.rank[b.c]
		switch {
		case oka && okb && ra != rb:
			return ra - rb
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a.c), string(b.c))
	})
	r := Report{Ready: len(hs) == 0}
	for _, h := range hs {
		r.Reasons = append(r.Reasons, h.reason)
	}
	t.noteLocked(r)
	return r
}

// Ready reports whether no condition holds.
func (t *Tracker) Ready() bool { return t.Report().Ready }

// noteLocked logs r when its readiness differs from the last report's and
// hands the change to OnChange.
func (t *Tracker) noteLocked(r Report) {
	reasons := strings.Join(r.Reasons, "; ")
	if t.known && t.ready == r.Ready {
		return
	}
	wasKnown, everUp, was := t.known, t.everUp, t.was
	t.known, t.ready, t.was = true, r.Ready, reasons
	log, role := t.opts.Logger, t.opts.Role
	switch {
	case r.Ready && everUp:
		log.Info(role+" ready again", "was", was)
	case r.Ready:
		log.Info(role + " ready")
	case everUp && strings.HasPrefix(reasons, "draining"):
		log.Info(role+" unready: draining", "reasons", reasons) // asked for, no outage
	case everUp:
		log.Warn(role+" unready", "reasons", reasons)
	case !wasKnown:
		log.Debug(role+" not ready yet", "reasons", reasons)
	}
	if r.Ready {
		t.everUp = true
	}
	if t.opts.OnChange != nil {
		ch := Change{Report: r, First: !everUp}
		if r.Ready && everUp {
			ch.Was = was
		}
		t.opts.OnChange(ch)
	}
}
