// Package whoami implements `talonctl auth whoami`.
package whoami

import (
	"context"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `auth whoami`.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML}

// WhoAmIOptions are the parsed flags of `auth whoami`.
type WhoAmIOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	Output    string
	NoHeaders bool
}

// NewCmdWhoAmI returns the command; runF replaces its run function in tests.
func NewCmdWhoAmI(f *cmdutil.Factory, runF func(*WhoAmIOptions) error) *cobra.Command {
	opts := &WhoAmIOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the token's principal, its scopes and the coordinator that answered",
		Long: `Show who the token authenticates as on the coordinator that answers: the
principal (the token's name; (anonymous) when the listener has no tokens),
its scopes, that coordinator's node ID and admin address, and for each verb
(read, metrics, cordon, uncordon, drain) whether that coordinator would
serve it. Any valid token may ask, whatever its scopes.`,
		Example: `  talonctl auth whoami
  talonctl auth whoami -o json`,
		Args:              cmdutil.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return whoamiRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row of the verb table")
	return cmd
}

func whoamiRun(ctx context.Context, opts *WhoAmIOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	var raw []byte
	w, err := client.WhoAmI(ctx, apiv1.RawBody(func(b []byte) { raw = b }))
	if err != nil {
		return err
	}
	if opts.Output != cmdutil.OutputTable {
		return (&cmdutil.Output{Kind: opts.Output}).Print(opts.IO.Out, raw, nil, false)
	}
	return writeTable(opts, w, client.Answered())
}

var trailingSpace = regexp.MustCompile(` +\n`)

func writeTable(opts *WhoAmIOptions, w *apiv1.WhoAmI, server string) error {
	cs := opts.IO.ColorScheme()
	var b strings.Builder
	kv := cmdutil.NewTable()
	principal := w.Principal
	if !w.Authenticated {
		principal += cs.Yellow(" (this listener has no tokens)")
	}
	scopes := strings.Join(w.Scopes, ", ")
	if scopes == "" {
		scopes = "none"
	}
	kv.AddRow("Principal:", principal)
	kv.AddRow("Scopes:", scopes)
	kv.AddRow("Answered by:", w.NodeID+" ("+w.Role+") at "+server)
	if w.ClusterID != "" {
		kv.AddRow("Cluster:", w.ClusterID)
	}
	if err := kv.Render(&b, true); err != nil {
		return err
	}
	b.WriteByte('\n')
	t := cmdutil.NewTable("VERB", "ALLOWED", "NEEDS", "REASON")
	for _, v := range w.Verbs {
		allowed := cs.Green("yes")
		if !v.Allowed {
			allowed = cs.Red("no")
		}
		t.AddRow(v.Verb, allowed, strings.Join(v.Scopes, ","), v.Reason)
	}
	if err := t.Render(&b, opts.NoHeaders); err != nil {
		return err
	}
	// An allowed verb has no reason: no padding after its last column.
	out := trailingSpace.ReplaceAllString(b.String(), "\n")
	_, err := io.WriteString(opts.IO.Out, out)
	return err
}
