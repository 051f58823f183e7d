package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/apiv1"
)

// Output formats (-o).
const (
	OutputTable = "table"
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
	OutputName  = "name"
	OutputText  = "text"
)

// AddOutputFlag registers -o/--output with the allowed formats (the first
// is the default) and their shell completion.
func AddOutputFlag(cmd *cobra.Command, p *string, allowed ...string) {
	cmd.Flags().StringVarP(p, "output", "o", allowed[0], "output format: "+strings.Join(allowed, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

// AddTemplateOutputFlag registers -o like AddOutputFlag, and completes it
// with the template forms too (jsonpath=, go-template=, custom-columns=
// and their -file= forms), with no space after them so the template
// follows at once.
func AddTemplateOutputFlag(cmd *cobra.Command, p *string, allowed ...string) {
	cmd.Flags().StringVarP(p, "output", "o", allowed[0], "output format: "+strings.Join(allowed, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if strings.Contains(toComplete, "=") {
			if strings.Contains(toComplete, "-file=") {
				return nil, cobra.ShellCompDirectiveDefault // a file name
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, a := range allowed {
			if strings.HasPrefix(a, toComplete) {
				out = append(out, a)
			}
		}
		// No space after a template form, so the template follows at
		// once; only when no plain format matches too.
		plain := len(out) > 0
		noSpace := false
		for _, t := range []string{"jsonpath=", "jsonpath-file=", "go-template=", "go-template-file=", "custom-columns=", "custom-columns-file="} {
			if strings.HasPrefix(t, toComplete) {
				out = append(out, t)
				noSpace = !plain
			}
		}
		d := cobra.ShellCompDirectiveNoFileComp
		if noSpace {
			d |= cobra.ShellCompDirectiveNoSpace
		}
		return out, d
	})
}

// WriteJSON writes v as indented JSON with a final newline. The field
// names are the API's.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteYAML writes v as YAML with the API's (JSON) field names.
func WriteYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WriteData writes v in format json or yaml.
func WriteData(w io.Writer, format string, v any) error {
	if format == OutputYAML {
		return WriteYAML(w, v)
	}
	return WriteJSON(w, v)
}

// Table writes aligned columns separated by three spaces, like kubectl.
// Cells may carry colour: widths are measured without escape sequences.
// The last column is not padded.
type Table struct {
	headers []string
	rows    [][]string
	// MinWidths are widths the columns keep at least (Widths of an
	// earlier part of the same table).
	MinWidths []int
	widths    []int // of the last Render
}

// NewTable returns a table with headers; nil headers print none.
func NewTable(headers ...string) *Table { return &Table{headers: headers} }

// Widths returns the column widths the last Render used: a table printed
// in parts (a watch's rows) passes them as the next part's MinWidths so
// the columns stay lined up.
func (t *Table) Widths() []int { return slices.Clone(t.widths) }

// AddRow appends a row.
func (t *Table) AddRow(cells ...string) { t.rows = append(t.rows, cells) }

// Len returns the number of rows.
func (t *Table) Len() int { return len(t.rows) }

// Render writes the table to w, with the header row unless noHeaders.
func (t *Table) Render(w io.Writer, noHeaders bool) error {
	rows := t.rows
	if !noHeaders && len(t.headers) > 0 {
		rows = append([][]string{t.headers}, rows...)
	}
	widths := slices.Clone(t.MinWidths)
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], ansi.StringWidth(c))
		}
	}
	t.widths = widths
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+3))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Duration renders d the way kubectl renders ages, with more precision
// for the short durations of heartbeats: 0s, 250ms, 1.5s, 42s, 3m12s, 5h7m,
// 3d4h. A negative duration renders as 0s.
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return strconv.FormatFloat(math.Floor(d.Seconds()*10)/10, 'f', -1, 64) + "s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		m := int(d.Minutes())
		return fmt.Sprintf("%dm%ds", m, int(d.Seconds())-60*m)
	case d < 24*time.Hour:
		h := int(d.Hours())
		return fmt.Sprintf("%dh%dm", h, int(d.Minutes())-60*h)
	}
	days := int(d.Hours()) / 24
	return fmt.Sprintf("%dd%dh", days, int(d.Hours())-24*days)
}

// Timestamp renders milliseconds since the Unix epoch as RFC 3339 in UTC,
// with milliseconds when they are not zero; 0 renders as "-".
func Timestamp(unixMs int64) string {
	if unixMs == 0 {
		return "-"
	}
	t := time.UnixMilli(unixMs).UTC()
	if t.Nanosecond() == 0 {
		return t.Format(time.RFC3339)
	}
	return t.Format("2006-01-02T15:04:05.000Z07:00")
}

// WarnStale tells ErrOut when an answer was built from a coordinator's last
// good snapshot (requested with --allow-stale) instead of a current one.
func WarnStale(s *IOStreams, m apiv1.Meta) {
	if !m.Stale {
		return
	}
	age := time.Duration(m.GeneratedAtUnixMs-m.ObservedAtUnixMs) * time.Millisecond
	fmt.Fprintf(s.ErrOut, "warning: stale answer: the coordinator cannot read the store; this is its last good snapshot, observed at %s (%s before the answer)\n",
		Timestamp(m.ObservedAtUnixMs), Duration(age))
}

// AllowStaleFlag registers --allow-stale.
func AllowStaleFlag(cmd *cobra.Command, p *bool) {
	cmd.Flags().BoolVar(p, "allow-stale", false,
		"when no coordinator can read the store, show the last good snapshot (marked stale) instead of failing with exit code 3")
}

// CallOptions returns the API call options of allowStale.
func CallOptions(allowStale bool) []apiv1.CallOption {
	if allowStale {
		return []apiv1.CallOption{apiv1.AllowStale()}
	}
	return nil
}
