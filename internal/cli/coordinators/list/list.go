// Package list implements `talonctl coordinators list`.
package list

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `coordinators list`.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML}

// ListOptions are the parsed flags of `coordinators list`.
type ListOptions struct {
	IO           *cmdutil.IOStreams
	Coordinators func(context.Context) ([]*cmdutil.Endpoint, error, error)
	Now          func() time.Time

	Output    string
	NoHeaders bool
}

// NewCmdList returns the command; runF replaces its run function in tests.
func NewCmdList(f *cmdutil.Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: &f.IO, Coordinators: f.Coordinators, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Ask every coordinator for its own view and mark the ones that disagree",
		Long: `Ask every coordinator of the cluster for its own view, like etcdctl endpoint
status --cluster: whether it is ready and why not, its store's health, the
store revision it read, its PlacementVersion, how many workers it may place
on, the age of its snapshot, its build version and the feature level its
build speaks (LEVEL). While more than one build version or feature level is
live (a rolling upgrade), a line on stderr says the cluster is mid-upgrade,
with how many processes run each version and the cluster's feature level.

The coordinators are the ones whose records advertise an admin address (read
through --server), and the --server URLs themselves. Each is asked alone.

Coordinators that read the same revision must agree on the PlacementVersion
and the eligible workers (placement is a function of the records): the
AGREE column says "yes" when they do, "no" when they do not (a bug or a
mixed-version cluster), and "-" when no other coordinator read that
revision (they heartbeat, so revisions move; rerun to compare).

Coordinators compare the live coordinators with coordinator-replicas: one
the answering coordinators saw live (within the last hour) that has no live
record now is listed as "missing", and a line on stderr says how many of the
expected are present, like a Deployment's READY 2/3.

Exit code 1 when any coordinator is missing, not ready, disagrees or does not
answer, so a script can alert on it; the table is printed either way.`,
		Example: `  talonctl coordinators list
  talonctl coordinators list -o json | jq '.items[] | select(.agree == "no")'`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row of the table")
	return cmd
}

// Row is one coordinator's answer, as -o json and -o yaml print it.
type Row struct {
	NodeID string `json:"nodeId"`
	URL    string `json:"url"`
	// Reachable is false when the coordinator gave no answer at all.
	Reachable bool     `json:"reachable"`
	Error     string   `json:"error,omitempty"`
	Ready     bool     `json:"ready"`
	Reasons   []string `json:"reasons"`
	// StoreHealthy is whether its last store read succeeded (a current
	// snapshot); false while it fails closed.
	StoreHealthy bool   `json:"storeHealthy"`
	StoreBackend string `json:"storeBackend,omitempty"`
	// StoreAlarms are the store's active alarms (etcd: NOSPACE, CORRUPT)
	// and StoreCapacity its database size and quota, as this coordinator
	// last heard them from the store.
	StoreAlarms      []apiv1.StoreAlarm   `json:"storeAlarms,omitempty"`
	StoreCapacity    *apiv1.StoreCapacity `json:"storeCapacity,omitempty"`
	Revision         string               `json:"revision,omitempty"`
	PlacementVersion string               `json:"placementVersion,omitempty"`
	EligibleWorkers  int                  `json:"eligibleWorkers"`
	SnapshotAgeMs    int64                `json:"snapshotAgeMs"`
	Version          string               `json:"version,omitempty"`
	// FeatureLevel is the feature level the coordinator's build speaks (0
	// for builds before feature levels); ClusterLevel is the cluster's as
	// it sees it, and Upgrade its whole survey (absent from coordinators
	// before feature levels).
	FeatureLevel int64          `json:"featureLevel"`
	ClusterLevel int64          `json:"clusterLevel"`
	Upgrade      *apiv1.Upgrade `json:"upgrade,omitempty"`
	// Agree is yes, no, or - (no other coordinator read the same revision).
	Agree string `json:"agree"`
	// DisagreesWith names the coordinators at the same revision with
	// another PlacementVersion or eligible count.
	DisagreesWith []string `json:"disagreesWith,omitempty"`
	// Missing is true for a coordinator the others saw live before that
	// has no live record now (coordinator-replicas expects it).
	Missing bool `json:"missing,omitempty"`

	presence *apiv1.CoordinatorPresence // the coordinator's count of live and expected ones
}

// RowList is the -o json|yaml object.
type RowList struct {
	Items []Row `json:"items"`
}

func listRun(ctx context.Context, opts *ListOptions) error {
	eps, listErr, err := opts.Coordinators(ctx)
	if err != nil {
		return err
	}
	if listErr != nil {
		fmt.Fprintf(opts.IO.ErrOut, "talonctl: warning: could not list the coordinators' records (%s); asking the --server URLs only\n", cmdutil.Message(listErr))
	}
	rows := make([]Row, len(eps))
	names := make([]string, len(eps))
	cmdutil.Each(eps, func(i int, ep *cmdutil.Endpoint) {
		rows[i] = ask(ctx, ep)
		names[i] = rows[i].NodeID
	})
	var kept []Row
	for _, i := range cmdutil.NameEndpoints(eps, names) {
		r := rows[i]
		if r.NodeID == "" {
			r.NodeID = eps[i].Name()
		}
		kept = append(kept, r)
	}
	Compare(kept)
	kept, expected, present := withMissing(kept)
	if present < expected {
		fmt.Fprintf(opts.IO.ErrOut, "talonctl: %d of %d expected coordinators present (coordinator-replicas %d)\n", present, expected, expected)
	}
	if note := upgradeNote(kept); note != "" {
		fmt.Fprintln(opts.IO.ErrOut, "talonctl: "+note)
	}
	if opts.Output != cmdutil.OutputTable {
		if err := cmdutil.WriteData(opts.IO.Out, opts.Output, RowList{Items: kept}); err != nil {
			return err
		}
	} else if err := writeTable(opts.IO, kept, opts.NoHeaders); err != nil {
		return err
	}
	bad := problems(kept)
	if unnamed := expected - len(kept); unnamed > 0 { // not even a URL to list it by
		bad = append(bad, fmt.Sprintf("%d more of the %d expected missing", unnamed, expected))
	}
	if len(bad) > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("%d of %d coordinators: %s", len(bad), len(kept), strings.Join(bad, "; "))}
	}
	return nil
}

// upgradeNote says, when the rows show more than one build version or
// feature level, that the cluster is mid-upgrade: the versions with how
// many processes run each, and the cluster's level; "" otherwise.
func upgradeNote(rows []Row) string {
	versions := map[string]bool{}
	var survey *apiv1.Upgrade
	lowest := int64(-1)
	for _, r := range rows {
		if !r.Reachable || r.Revision == "" {
			continue
		}
		versions[r.Version] = true
		if lowest < 0 || r.FeatureLevel < lowest {
			lowest = r.FeatureLevel
		}
		if r.Upgrade != nil && (survey == nil || r.Upgrade.Mixed) {
			survey = r.Upgrade
		}
	}
	if survey == nil || (!survey.Mixed && len(versions) <= 1) {
		if len(versions) > 1 {
			return fmt.Sprintf("the coordinators run %d build versions: the cluster is mid-upgrade", len(versions))
		}
		return ""
	}
	var parts []string
	for _, v := range survey.Versions {
		parts = append(parts, fmt.Sprintf("%s %d at %s (level %d)", plural(v.Count, v.Role), v.Count, dash(v.Version), v.FeatureLevel))
	}
	level := survey.FeatureLevel
	if lowest >= 0 {
		level = min(level, lowest)
	}
	return fmt.Sprintf("the cluster is mid-upgrade: %s; cluster feature level %d (talonctl version lists every process)", strings.Join(parts, ", "), level)
}

func plural(n int, role string) string {
	if n == 1 {
		return role
	}
	return role + "s"
}

// problems names what is wrong with each row: missing, unreachable, not
// ready, disagreeing.
func problems(rows []Row) []string {
	var bad []string
	for _, r := range rows {
		switch {
		case r.Missing:
			bad = append(bad, r.NodeID+" is missing")
		case !r.Reachable:
			bad = append(bad, r.NodeID+" did not answer")
		case r.Agree == "no":
			bad = append(bad, r.NodeID+" disagrees with "+strings.Join(r.DisagreesWith, ", "))
		case r.Revision != "" && !r.Ready:
			bad = append(bad, r.NodeID+" is not ready")
		}
	}
	return bad
}

// withMissing adds a row for each coordinator an answering one names as
// missing that is not listed, and returns the rows with the most
// coordinators any answer expected and found present. A missing one whose
// admin address is that of an unnamed row (a --server URL that did not
// answer) names that row instead of getting its own.
func withMissing(rows []Row) (out []Row, expected, present int) {
	listed := map[string]bool{}
	for _, r := range rows {
		listed[r.NodeID] = true
	}
	out = rows
	for _, r := range rows {
		if r.presence == nil {
			continue
		}
		expected, present = max(expected, r.presence.Expected), max(present, r.presence.Present)
		for _, m := range r.presence.Missing {
			if listed[m.NodeID] {
				continue
			}
			listed[m.NodeID] = true
			if i := unnamedAt(out, m.AdminAddress); i >= 0 {
				out[i].NodeID = m.NodeID
				continue
			}
			out = append(out, Row{NodeID: m.NodeID, Missing: true, Reasons: []string{}, Agree: "-",
				Error: fmt.Sprintf("no live record (%d of %d expected present)", r.presence.Present, r.presence.Expected)})
		}
	}
	return out, expected, present
}

// unnamedAt returns the index of the row that is known only by its URL
// and has admin address addr, or -1.
func unnamedAt(rows []Row, addr string) int {
	if addr == "" {
		return -1
	}
	for i, r := range rows {
		if r.NodeID == r.URL {
			if u, err := url.Parse(r.URL); err == nil && u.Host == addr {
				return i
			}
		}
	}
	return -1
}

// ask reads one coordinator's cluster summary (stale allowed: a
// coordinator failing closed still shows what it last saw) and readiness.
func ask(ctx context.Context, ep *cmdutil.Endpoint) Row {
	r := Row{NodeID: ep.NodeID, URL: ep.URL, Version: ep.Version, Reasons: []string{}}
	c, err := ep.Client.Cluster(ctx, apiv1.AllowStale())
	if err != nil {
		r.Reachable = !cmdutil.IsUnreachable(err)
		r.Error = cmdutil.Message(err)
		if !r.Reachable {
			r.Error = cmdutil.NoAnswer(err)
		}
		return r
	}
	r.Reachable = true
	if r.NodeID == "" {
		r.NodeID = c.ServedBy
	}
	r.StoreHealthy, r.StoreBackend = c.Store.Healthy, c.Store.Backend
	r.StoreAlarms, r.StoreCapacity = c.Store.Alarms, c.Store.Capacity
	r.Revision, r.PlacementVersion, r.EligibleWorkers = c.Revision, c.PlacementVersion, c.EligibleWorkers
	r.SnapshotAgeMs = max(0, c.GeneratedAtUnixMs-c.ObservedAtUnixMs)
	if u := c.Upgrade; u != nil { // a coordinator before feature levels sends none: level 0
		r.FeatureLevel, r.ClusterLevel, r.Upgrade = u.ServerLevel, u.FeatureLevel, u
	}
	if c.Coordinators.Expected > 0 { // an older coordinator sends none
		r.presence = &c.Coordinators
	}
	h, err := ep.Client.Readyz(ctx)
	switch {
	case err != nil:
		r.Reasons = []string{"readiness unknown: " + cmdutil.Message(err)}
	default:
		r.Ready = h.Ready()
		r.Reasons = append(r.Reasons, h.Reasons...)
		if !r.Ready && len(r.Reasons) == 0 {
			r.Reasons = []string{"not ready (the reasons need a token)"}
		}
	}
	r.Reasons = withAlarms(r.Reasons, r.StoreAlarms)
	return r
}

// withAlarms adds the words of each store alarm that the reasons do not
// already hold.
func withAlarms(reasons []string, alarms []apiv1.StoreAlarm) []string {
	for _, a := range alarms {
		if !slices.Contains(reasons, a.Message) {
			reasons = append(reasons, a.Message)
		}
	}
	return reasons
}

// storeWord is the STORE column: an active alarm first (the store refuses
// writes), then whether the coordinator's reads succeed.
func storeWord(cs *cmdutil.ColorScheme, r Row) string {
	if len(r.StoreAlarms) > 0 {
		names := make([]string, len(r.StoreAlarms))
		for i, a := range r.StoreAlarms {
			names[i] = a.Alarm
		}
		return cs.Red("alarm " + strings.Join(names, ","))
	}
	if !r.StoreHealthy {
		return cs.Red("failing")
	}
	return cs.Green("healthy")
}

// Compare fills in Agree and DisagreesWith: coordinators that answered at
// the same revision agree when their PlacementVersion and eligible count
// are the same.
func Compare(rows []Row) {
	for i := range rows {
		r := &rows[i]
		r.Agree, r.DisagreesWith = "-", nil
		if !r.Reachable || r.Revision == "" {
			continue
		}
		peers := false
		for j := range rows {
			o := rows[j]
			if i == j || !o.Reachable || o.Revision != r.Revision {
				continue
			}
			peers = true
			if o.PlacementVersion != r.PlacementVersion || o.EligibleWorkers != r.EligibleWorkers {
				r.DisagreesWith = append(r.DisagreesWith, o.NodeID)
			}
		}
		switch {
		case len(r.DisagreesWith) > 0:
			r.Agree = "no"
		case peers:
			r.Agree = "yes"
		}
	}
}

func writeTable(s *cmdutil.IOStreams, rows []Row, noHeaders bool) error {
	cs := s.ColorScheme()
	t := cmdutil.NewTable("COORDINATOR", "READY", "STORE", "REVISION", "PLACEMENT-VERSION", "ELIGIBLE", "SNAPSHOT-AGE", "VERSION", "LEVEL", "AGREE", "REASON")
	for _, r := range rows {
		if r.Missing {
			t.AddRow(r.NodeID, cs.Red("missing"), "-", "-", "-", "-", "-", "-", "-", "-", r.Error)
			continue
		}
		if !r.Reachable {
			t.AddRow(r.NodeID, cs.Red("unreachable"), "-", "-", "-", "-", "-", dash(r.Version), "-", "-", r.Error)
			continue
		}
		if r.Revision == "" { // answered with an error, not a view
			t.AddRow(r.NodeID, cs.Red("error"), "-", "-", "-", "-", "-", dash(r.Version), "-", "-", r.Error)
			continue
		}
		ready := cs.Green("yes")
		if !r.Ready {
			ready = cs.Red("no")
		}
		store := storeWord(cs, r)
		agree := r.Agree
		switch agree {
		case "no":
			agree = cs.Red("no")
		case "yes":
			agree = cs.Green("yes")
		}
		reason := strings.Join(r.Reasons, "; ")
		if len(r.DisagreesWith) > 0 {
			reason = strings.TrimPrefix(reason+"; ", "; ") + "disagrees with " + strings.Join(r.DisagreesWith, ", ") + " at the same revision"
		}
		t.AddRow(r.NodeID, ready, store, r.Revision, r.PlacementVersion, strconv.Itoa(r.EligibleWorkers),
			cmdutil.Duration(time.Duration(r.SnapshotAgeMs)*time.Millisecond), dash(r.Version), strconv.FormatInt(r.FeatureLevel, 10), agree, dash(reason))
	}
	var b strings.Builder
	if err := t.Render(&b, noHeaders); err != nil {
		return err
	}
	_, err := io.WriteString(s.Out, b.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
