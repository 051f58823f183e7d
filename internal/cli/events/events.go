// Package events implements `talonctl events`.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/eventtable"
	"github.com/talonhq/talon/internal/cluster"
)

// Formats are the -o values of `events`.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML}

// Types are the event types --type takes.
var Types = eventtable.Types

// EventsOptions are the parsed flags of `events`.
type EventsOptions struct {
	IO           *cmdutil.IOStreams
	Coordinators func(context.Context) ([]*cmdutil.Endpoint, error, error)
	Now          func() time.Time

	For       string
	Types     []string
	Since     time.Duration
	Limit     int
	Watch     bool
	Output    string
	NoHeaders bool
	// NoCoalesce lists every occurrence on its own row.
	NoCoalesce bool
}

// NewCmdEvents returns the command; runF replaces its run function in tests.
func NewCmdEvents(f *cmdutil.Factory, runF func(*EventsOptions) error) *cobra.Command {
	opts := &EventsOptions{IO: &f.IO, Coordinators: f.Coordinators, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List what the coordinators observed: joins, health and readiness changes, expiries",
		Long: `List the events every coordinator observed, merged by time: nodes joining,
changing health or readiness (with the reason, such as cordoned), restarting,
expiring or being removed, PlacementVersion changes, and each coordinator's
own readiness and store reachability.

Each coordinator keeps its last 1000 events in memory (not in the shared
store): a restarted coordinator starts an empty list, and two coordinators
list the same change each in their own row.

-w keeps watching (each coordinator is long-polled) and prints new events as
they arrive, one row (or, with -o json, one JSON object per line) each.`,
		Example: `  talonctl events
  talonctl events --for w-1
  talonctl events -w --type node_health_changed --type node_readiness_changed
  talonctl events --since 10m -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if opts.For != "" {
				if err := cluster.ValidateID("--for", opts.For); err != nil {
					return cmdutil.UsageError(err)
				}
			}
			for _, t := range opts.Types {
				if !slices.Contains(Types, t) {
					return cmdutil.FlagValueError("type", t, Types)
				}
			}
			if opts.Since < 0 {
				return cmdutil.UsageErrorf("--since %s: must not be negative", opts.Since)
			}
			if opts.Limit < 1 || opts.Limit > apiv1.MaxEventLimit {
				return cmdutil.UsageErrorf("--limit %d: must be from 1 to %d (events kept per coordinator)", opts.Limit, apiv1.MaxEventLimit)
			}
			if opts.Watch && opts.Output == cmdutil.OutputYAML {
				return cmdutil.UsageErrorf("--watch with -o yaml: use -o json (one object per line) or the table")
			}
			if runF != nil {
				return runF(opts)
			}
			return eventsRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.For, "for", "", "only the events of the node `NODE_ID`")
	cmd.Flags().StringSliceVar(&opts.Types, "type", nil, "only events of this `TYPE` (repeat or comma-separate): "+strings.Join(Types, ", "))
	cmd.Flags().DurationVar(&opts.Since, "since", 0, "only events of the last `DURATION` (such as 10m); 0 for all kept")
	cmd.Flags().IntVar(&opts.Limit, "limit", apiv1.MaxEventLimit, "at most this many events per coordinator (the newest)")
	cmd.Flags().BoolVarP(&opts.Watch, "watch", "w", false, "after listing, print new events as they arrive")
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row of the table")
	cmd.Flags().BoolVar(&opts.NoCoalesce, "no-coalesce", false, "one row per occurrence: without it, the table folds repeats of an event (same type, node, change and reason) into one row, \"(xN over D)\"; -o json and -w always list each")
	_ = cmd.RegisterFlagCompletionFunc("for", cmdutil.CompleteNodeIDs(f))
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(Types, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *EventsOptions) filter() apiv1.EventFilter {
	f := apiv1.EventFilter{NodeID: o.For, Types: o.Types}
	if o.Since > 0 {
		f.SinceUnixMs = o.Now().Add(-o.Since).UnixMilli()
	}
	return f
}

func eventsRun(ctx context.Context, opts *EventsOptions) error {
	eps, listErr, err := opts.Coordinators(ctx)
	if err != nil {
		return err
	}
	if listErr != nil {
		fmt.Fprintf(opts.IO.ErrOut, "talonctl: warning: could not list the coordinators' records (%s); asking the --server URLs only\n", cmdutil.Message(listErr))
	}
	res := eventtable.Gather(ctx, eps, opts.filter(), opts.Limit)
	eventtable.WarnFailed(opts.IO.ErrOut, res.Failed)
	if len(res.Failed) == len(eps) {
		return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: fmt.Errorf("no coordinator answered (%d asked)", len(eps))}
	}
	io := opts.IO
	p := &eventtable.Printer{TTY: io.IsStdoutTTY(), NoHeaders: opts.NoHeaders, Colors: io.ColorScheme(), Now: opts.Now(), Stream: opts.Watch, Coordinators: names(eps)}
	switch {
	case opts.Output == cmdutil.OutputTable:
		if len(res.Events) == 0 && !opts.Watch {
			fmt.Fprintln(io.ErrOut, "No events.")
			return nil
		}
		if err := writeTable(opts, p, res.Events); err != nil {
			return err
		}
	case opts.Watch: // -o json: one object per line
		for _, e := range res.Events {
			if err := writeLine(io, e); err != nil {
				return err
			}
		}
	default:
		items := res.Events
		if items == nil {
			items = []apiv1.Event{} // "items": [] with nothing, never null
		}
		if err := cmdutil.WriteData(io.Out, opts.Output, struct {
			Items []apiv1.Event `json:"items"`
		}{items}); err != nil {
			return err
		}
	}
	if !opts.Watch {
		return nil
	}
	return watch(ctx, opts, eps, res, p)
}

// names are the node IDs of the endpoints that have one (a --server URL's
// is learned from its events).
func names(eps []*cmdutil.Endpoint) []string {
	var out []string
	for _, ep := range eps {
		if ep.NodeID != "" {
			out = append(out, ep.NodeID)
		}
	}
	return out
}

func writeLine(io *cmdutil.IOStreams, e apiv1.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(io.Out, "%s\n", b)
	return err
}

// watch long-polls every coordinator from its cursor and prints events as
// they come, until ctx ends (Ctrl-C). A coordinator that restarted (a new
// incarnation) is read from its first event again. A node event every
// coordinator lists (one ID) is printed once.
func watch(ctx context.Context, opts *EventsOptions, eps []*cmdutil.Endpoint, listed eventtable.Result, p *eventtable.Printer) error {
	printed := eventtable.NewSeen(listed.Events)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan watchBatch)
	done := make(chan struct{})
	f := opts.filter()
	go func() {
		defer close(done)
		cmdutil.Each(eps, func(i int, ep *cmdutil.Endpoint) { pollEvents(ctx, ep, listed.Last[i], f, ch) })
	}()
	defer func() { cancel(); <-done }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-ch:
			if b.warn != "" {
				fmt.Fprintln(opts.IO.ErrOut, b.warn)
				continue
			}
			if err := printWatched(opts, p, printed.Filter(b.events)); err != nil {
				return err
			}
		}
	}
}

// watchBatch is what one long-poll brought: events, or a warning.
type watchBatch struct {
	events []apiv1.Event
	warn   string
}

// pollEvents long-polls ep from cur until ctx ends, sending what comes on
// ch; a failure is sent once as a warning and retried every second.
func pollEvents(ctx context.Context, ep *cmdutil.Endpoint, cur eventtable.Cursor, f apiv1.EventFilter, ch chan<- watchBatch) {
	send := func(b watchBatch) {
		select {
		case ch <- b:
		case <-ctx.Done():
		}
	}
	warned := false
	for ctx.Err() == nil {
		q := f
		q.After, q.Watch, q.Limit = cur.Seq, true, apiv1.MaxEventLimit
		page, err := ep.Client.Events(ctx, q)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !warned {
				warned = true
				send(watchBatch{warn: fmt.Sprintf("talonctl: warning: watching %s: %s; retrying", ep.Name(), cmdutil.Message(err))})
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		case cur.OK && page.Incarnation != cur.Incarnation:
			cur = eventtable.Cursor{Incarnation: page.Incarnation, OK: true} // restarted: from its first event
			warned = false
			continue
		}
		warned = false
		cur = eventtable.Cursor{Seq: max(cur.Seq, page.LastSeq), Incarnation: page.Incarnation, OK: true}
		if len(page.Items) > 0 {
			cur.Seq = page.Items[len(page.Items)-1].Seq
			send(watchBatch{events: page.Items})
		}
	}
}

// printWatched prints a watch's new events: one JSON object per line with
// -o json, else table rows lined up with the table above them, with the
// time of day instead of an age that would always read "0ms ago".
func printWatched(opts *EventsOptions, p *eventtable.Printer, evs []apiv1.Event) error {
	for _, e := range evs {
		if opts.Output == cmdutil.OutputJSON {
			if err := writeLine(opts.IO, e); err != nil {
				return err
			}
			continue
		}
		p.NoHeaders, p.Now, p.Clock = true, opts.Now(), true
		if err := p.Write(opts.IO.Out, []apiv1.Event{e}); err != nil {
			return err
		}
	}
	return nil
}

// writeTable prints evs as a table, repeats folded (eventtable.Coalesce)
// unless --no-coalesce or a watch, whose rows follow one by one.
func writeTable(opts *EventsOptions, p *eventtable.Printer, evs []apiv1.Event) error {
	if opts.NoCoalesce || opts.Watch {
		return p.Write(opts.IO.Out, evs)
	}
	return p.WriteFolded(opts.IO.Out, eventtable.Coalesce(evs))
}
