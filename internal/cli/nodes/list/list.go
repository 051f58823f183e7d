package list

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/nodes/nodetable"
	"github.com/talonhq/talon/internal/cluster"
)

// DefaultInterval is the --interval of --watch.
const DefaultInterval = 2 * time.Second

// clearScreen moves the cursor home and clears the screen, for redraws.
const clearScreen = "\x1b[H\x1b[2J"

// ListOptions are the parsed flags of `nodes list`.
type ListOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)
	Now    func() time.Time

	Filter apiv1.NodeFilter
	// Fields is the --field-selector, applied to the listing; nil for none.
	Fields     fields.Selector
	Output     string
	out        *cmdutil.Output // Output parsed
	NoHeaders  bool
	SortBy     string
	Watch      bool
	Interval   time.Duration
	AllowStale bool
	// LabelColumns (-L) and ShowLabels (--show-labels) add label columns.
	LabelColumns []string
	ShowLabels   bool
}

// NewCmdList returns the command; runF replaces its run function in tests.
func NewCmdList(f *cmdutil.Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: &f.IO, Client: f.Client, Now: f.Now}
	var role, health string
	var ready bool
	var selectors []string
	var fieldSelector string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the live nodes of the cluster",
		Long: `List the live coordinators and workers, following the API's pagination to the
end, in the API's order (role, then node ID) unless --sort-by says otherwise
(a leading - reverses a key's order: --sort-by=-name).

-l/--selector takes the Kubernetes label-selector syntax, evaluated by the
server: key=value, key==value, key!=value, 'key in (a,b)', 'key notin (a,b)',
key (has the label), !key (lacks it); comma-joined or repeated, all must
match. --field-selector takes field=value, field==value and field!=value
over the fields ` + strings.Join(SelectableFields, ", ") + `; all must match.

On a terminal, times are relative (heartbeat age, uptime); when the output is
piped they are absolute RFC 3339 timestamps in UTC (LAST HEARTBEAT, STARTED).
-o json and -o yaml print the API's list object with every page's items in
one items array and the metadata (revision, observation time) of the last
page. An empty result is not an error.

` + cmdutil.TemplateFormatsHelp + `

With --watch the list is fetched again every --interval, and at once when
the answering coordinator observes a node joining, leaving or changing
health or readiness (its events are long-polled between listings; an
interval under 1s only polls): redrawn in place on a terminal; piped, the
table is printed once and then only the rows that changed (a node that left
is named on stderr), like kubectl get -w; -o json and -o yaml print every
listing. It runs until interrupted; failures to
reach the cluster are shown and retried; an authentication failure ends it.`,
		Example: `  talonctl nodes list
  talonctl nodes list --role worker --health unhealthy
  talonctl nodes list -l topology.kubernetes.io/zone=eu-west-1a -o wide
  talonctl nodes list -l 'zone in (a,b),tier!=hdd,!spot'
  talonctl nodes list --field-selector role=worker,health!=healthy
  talonctl nodes list --sort-by=-capacity
  talonctl nodes list --ready=false -o name
  talonctl nodes list --sort-by age -w --interval 1s
  talonctl nodes list -o jsonpath='{.items[*].nodeId}'
  talonctl nodes list -o custom-columns=NODE:.nodeId,ZONE:.labels.zone`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			out, err := cmdutil.ParseOutput(opts.Output, nodetable.Formats, nil)
			if err != nil {
				return err
			}
			opts.out = out
			if opts.SortBy != "" {
				if err := nodetable.CheckSortBy(opts.SortBy); err != nil {
					return err
				}
			}
			if role != "" {
				if err := cmdutil.CheckEnum("role", role, roles()); err != nil {
					return err
				}
				opts.Filter.Role = role
			}
			if health != "" {
				if err := cmdutil.CheckEnum("health", health, healthStates()); err != nil {
					return err
				}
				opts.Filter.Health = health
			}
			if fl.Changed("ready") {
				opts.Filter.Ready = &ready
			}
			if opts.Filter.LabelSelector, err = ParseLabelSelector(selectors); err != nil {
				return err
			}
			if fl.Changed("field-selector") {
				if opts.Fields, err = ParseFieldSelector(fieldSelector); err != nil {
					return err
				}
			}
			if opts.Watch && opts.Interval <= 0 {
				return cmdutil.UsageErrorf("--interval %s: must be positive", opts.Interval)
			}
			if runF != nil {
				return runF(opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&role, "role", "", "only nodes of `ROLE`: "+strings.Join(roles(), ", "))
	fl.StringVar(&health, "health", "", "only nodes whose effective health is `STATE`: "+strings.Join(healthStates(), ", "))
	fl.BoolVar(&ready, "ready", false, "only ready nodes (--ready=false: only nodes that are not ready)")
	fl.StringArrayVarP(&selectors, "selector", "l", nil, "only nodes whose labels match `SELECTOR`: key=value, key==value, key!=value, 'key in (a,b)', 'key notin (a,b)', key, !key; comma-join or repeat, all must match")
	fl.StringVar(&fieldSelector, "field-selector", "", FieldSelectorHelp)
	cmdutil.AddTemplateOutputFlag(cmd, &opts.Output, nodetable.Formats...)
	cmd.Flags().StringSliceVarP(&opts.LabelColumns, "label-columns", "L", nil, "add a column with the value of each label `KEY` (repeat or comma-separate)")
	cmd.Flags().BoolVar(&opts.ShowLabels, "show-labels", false, "add a LABELS column to the table")
	cmd.Flags().Lookup("output").Usage += "; or jsonpath=, go-template=, custom-columns= (TEMPLATE), or their -file=FILE forms"
	fl.BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row of table and wide output")
	fl.StringVar(&opts.SortBy, "sort-by", "", nodetable.SortHelp)
	fl.BoolVarP(&opts.Watch, "watch", "w", false, "list again every --interval until interrupted")
	fl.DurationVar(&opts.Interval, "interval", DefaultInterval, "time between two listings of --watch")
	cmdutil.AllowStaleFlag(cmd, &opts.AllowStale)
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(roles(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("health", cobra.FixedCompletions(healthStates(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("sort-by", cobra.FixedCompletions(nodetable.SortKeys, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("field-selector", cobra.FixedCompletions(fieldCompletions(), cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	_ = cmd.RegisterFlagCompletionFunc("selector", cmdutil.CompleteLabels(f))
	return cmd
}

func roles() []string {
	out := make([]string, len(cluster.Roles()))
	for i, r := range cluster.Roles() {
		out[i] = string(r)
	}
	return out
}

func healthStates() []string {
	out := make([]string, len(cluster.HealthStates()))
	for i, h := range cluster.HealthStates() {
		out[i] = string(h)
	}
	return out
}

// ParseLabelSelector joins the -l values with commas and parses them with
// the API's parser (the Kubernetes label-selector syntax), so that a bad
// selector is a usage error before any request. It returns the selector
// in its canonical form for the API's labelSelector parameter; "" for
// none.
func ParseLabelSelector(sels []string) (string, error) {
	if len(sels) == 0 {
		return "", nil
	}
	joined := strings.Join(sels, ",")
	sel, err := apiv1.ParseLabelSelector(joined)
	if err != nil {
		return "", cmdutil.UsageErrorf("--selector %q: %w", joined, err)
	}
	if sel.Empty() {
		return "", nil
	}
	return sel.String(), nil
}

// fieldCompletions completes --field-selector: every field= and the
// fixed values of role, health and ready.
func fieldCompletions() []string {
	var out []string
	for _, f := range SelectableFields {
		out = append(out, f+"=")
	}
	for _, r := range roles() {
		out = append(out, FieldRole+"="+r)
	}
	for _, h := range healthStates() {
		out = append(out, FieldHealth+"="+h)
	}
	return append(out, FieldReady+"=true", FieldReady+"=false")
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if !opts.Watch {
		list, err := fetch(ctx, client, opts)
		if err != nil {
			return err
		}
		return render(opts, list, 0)
	}
	return watch(ctx, client, opts)
}

// listing is one fetched listing: the decoded list, and for the raw
// formats the API's own objects.
type listing struct {
	*apiv1.NodeList
	// raw is the last page's object with every page's items (in the
	// order of NodeList.Items) and no continue token; items are those
	// items. Both are nil unless the output format prints raw objects.
	raw   []byte
	items [][]byte
}

func fetch(ctx context.Context, client *apiv1.Client, opts *ListOptions) (*listing, error) {
	call := cmdutil.CallOptions(opts.AllowStale)
	var pages [][]byte
	raw := opts.out != nil && opts.out.IsRaw()
	if raw {
		call = append(call, apiv1.RawBody(func(b []byte) { pages = append(pages, b) }))
	}
	list, err := client.AllNodes(ctx, opts.Filter, call...)
	if err != nil {
		return nil, err
	}
	list.Items = selectFields(list.Items, opts.Fields)
	nodetable.Sort(list.Items, opts.SortBy)
	l := &listing{NodeList: list}
	if raw {
		if l.raw, l.items, err = mergePages(pages, list.Items); err != nil {
			return nil, fmt.Errorf("admin api: listing nodes: %w", err)
		}
	}
	return l, nil
}

// mergePages joins the raw pages of one listing: the last page's object
// (its metadata) with the items of every page, ordered as sorted, and an
// empty continue token. Items are matched to sorted by role and node ID.
func mergePages(pages [][]byte, sorted []apiv1.Node) ([]byte, [][]byte, error) {
	if len(pages) == 0 {
		return nil, nil, fmt.Errorf("no page received")
	}
	byKey := map[string]json.RawMessage{}
	var last *cmdutil.RawObject
	for _, p := range pages {
		obj, err := cmdutil.ParseRawObject(p)
		if err != nil {
			return nil, nil, err
		}
		var items []json.RawMessage
		if v := obj.Get("items"); v != nil {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, nil, fmt.Errorf("items: %w", err)
			}
		}
		for _, it := range items {
			var id struct{ NodeID, Role string }
			if err := json.Unmarshal(it, &id); err != nil {
				return nil, nil, err
			}
			byKey[id.Role+"/"+id.NodeID] = it
		}
		last = obj
	}
	items := make([][]byte, 0, len(sorted))
	joined := make([]json.RawMessage, 0, len(sorted))
	for _, n := range sorted {
		it, ok := byKey[n.Role+"/"+n.NodeID]
		if !ok {
			return nil, nil, fmt.Errorf("node %s %s has no raw item", n.Role, n.NodeID)
		}
		items, joined = append(items, it), append(joined, it)
	}
	ib, err := json.Marshal(joined)
	if err != nil {
		return nil, nil, err
	}
	last.Set("items", ib)
	if last.Get("continue") != nil {
		last.Set("continue", json.RawMessage(`""`))
	}
	b, err := last.MarshalJSON()
	return b, items, err
}

// render prints one listing to Out; iteration counts the listings of a
// watch that were printed before (0 without --watch).
func render(opts *ListOptions, list *listing, iteration int) error {
	io := opts.IO
	cmdutil.WarnStale(io, list.Meta)
	if list.raw != nil {
		if opts.out.Kind == cmdutil.OutputYAML && iteration > 0 {
			fmt.Fprintln(io.Out, "---")
		}
		return opts.out.Print(io.Out, list.raw, list.items, opts.NoHeaders)
	}
	if iteration > 0 && !io.IsStdoutTTY() {
		fmt.Fprintln(io.Out)
	}
	if len(list.Items) == 0 {
		if opts.Output != cmdutil.OutputName {
			fmt.Fprintln(io.ErrOut, "No nodes found.")
		}
		return nil
	}
	p := &nodetable.Printer{Format: opts.Output, TTY: io.IsStdoutTTY(), NoHeaders: opts.NoHeaders, Colors: io.ColorScheme(),
		LabelColumns: opts.LabelColumns, ShowLabels: opts.ShowLabels}
	return p.Write(io.Out, list.Items, list.ObservedAtUnixMs)
}

// watch lists every interval until ctx ends. On a terminal each listing
// replaces the screen; otherwise listings are appended. Authentication and
// usage errors end the watch; others (unreachable, 503, ...) are shown and
// retried, since they may heal.
func watch(ctx context.Context, client *apiv1.Client, opts *ListOptions) error {
	io := opts.IO
	tty := io.IsStdoutTTY()
	changes := &changedRows{last: map[string]string{}}
	cursor := eventCursor{}
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		list, err := fetch(ctx, client, opts)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if code := cmdutil.ExitCode(err); code != cmdutil.ExitUnavailable && code != cmdutil.ExitFailure {
				return err
			}
		}
		if tty {
			// Draw into a buffer and write once, so the screen never shows
			// a half-drawn listing.
			var buf bytes.Buffer
			screen := *io
			screen.Out, screen.ErrOut = &buf, &buf
			fmt.Fprintf(&buf, "%sEvery %s: talonctl nodes list%s%s\n\n", clearScreen, opts.Interval, strings.Repeat(" ", 4), opts.Now().Format("2006-01-02 15:04:05 MST"))
			if err != nil {
				fmt.Fprintf(&buf, "error: %v\n", err)
			} else {
				sub := *opts
				sub.IO = &screen
				if err := render(&sub, list, 0); err != nil {
					return err
				}
			}
			if _, err := io.Out.Write(buf.Bytes()); err != nil {
				return err
			}
		} else if err != nil {
			fmt.Fprintf(io.ErrOut, "talonctl: %v (retrying in %s)\n", err, opts.Interval)
		} else if list.raw != nil {
			if err := render(opts, list, i); err != nil {
				return err
			}
		} else if err := changes.print(opts, list, i == 0); err != nil {
			return err
		}
		waitChange(ctx, client, t.C, opts.Interval, &cursor)
	}
	return nil
}

// changedRows prints a piped watch's rows: every row the first time, then
// only the rows that differ from the last listing in anything but the
// heartbeat time, which moves with every heartbeat (a node that left is
// named on stderr).
type changedRows struct {
	last map[string]string // row text by role/node ID
}

func (c *changedRows) print(opts *ListOptions, list *listing, first bool) error {
	io := opts.IO
	cmdutil.WarnStale(io, list.Meta)
	p := &nodetable.Printer{Format: opts.Output, TTY: false, Colors: io.ColorScheme(),
		LabelColumns: opts.LabelColumns, ShowLabels: opts.ShowLabels}
	now := map[string]string{}
	var changed []apiv1.Node
	for _, n := range list.Items {
		key := n.Role + "/" + n.NodeID
		cells := p.Row(&n, list.ObservedAtUnixMs)
		if opts.Output != cmdutil.OutputName {
			cells = append(cells[:4:4], cells[5:]...) // without HEARTBEAT
		}
		now[key] = strings.Join(cells, "\x00")
		if c.last[key] != now[key] {
			changed = append(changed, n)
		}
	}
	if !first {
		for key := range c.last {
			if _, ok := now[key]; !ok {
				fmt.Fprintf(io.ErrOut, "talonctl: node/%s left (expired or removed)\n", key[strings.Index(key, "/")+1:])
			}
		}
	}
	c.last = now
	if first && len(changed) == 0 {
		if opts.Output != cmdutil.OutputName {
			fmt.Fprintln(io.ErrOut, "No nodes found.")
		}
		return nil
	}
	if len(changed) == 0 {
		return nil
	}
	p.NoHeaders = opts.NoHeaders || !first
	return p.Write(io.Out, changed, list.ObservedAtUnixMs)
}

// eventCursor is where a watch's event long poll continues.
type eventCursor struct {
	seq         uint64
	incarnation string
	off         bool // the server has no events endpoint (an older one): poll only
	primed      bool // seq is the newest event of incarnation: wait for the next
}

// waitChange waits for the next listing: the interval's tick, or earlier
// when the answering coordinator observes a membership change (its
// events endpoint, long-polled: a server-side watch). Heartbeats that
// change only counters produce no event; the tick lists those.
func waitChange(ctx context.Context, client *apiv1.Client, tick <-chan time.Time, interval time.Duration, cur *eventCursor) {
	if cur.off || interval < time.Second {
		select {
		case <-ctx.Done():
		case <-tick:
		}
		return
	}
	wctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	for wctx.Err() == nil {
		left := time.Until(deadlineOf(wctx))
		page, err := client.Events(wctx, apiv1.EventFilter{After: cur.seq, Watch: cur.primed, WatchSeconds: max(1, int(left/time.Second)), Limit: 1})
		switch {
		case errors.Is(err, apiv1.ErrNotFound):
			cur.off = true
		case err == nil && cur.primed && page.Incarnation == cur.incarnation && len(page.Items) > 0:
			cur.seq = page.LastSeq
			return // a change: list now
		case err == nil:
			// The first call, or a coordinator that restarted (or
			// another one answering): watch from its newest event.
			cur.seq, cur.incarnation, cur.primed = page.LastSeq, page.Incarnation, true
			continue
		}
		break // an error: wait out the interval
	}
	select {
	case <-ctx.Done():
	case <-wctx.Done():
	}
}

// deadlineOf is ctx's deadline (it has one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
