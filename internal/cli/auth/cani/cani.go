// Package cani implements `talonctl auth can-i`.
package cani

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `auth can-i`.
var Formats = []string{cmdutil.OutputText, cmdutil.OutputJSON, cmdutil.OutputYAML}

// Verbs are the verbs can-i knows.
var Verbs = []string{apiv1.VerbRead, apiv1.VerbMetrics, apiv1.VerbCordon, apiv1.VerbUncordon, apiv1.VerbDrain, apiv1.VerbWarm, apiv1.VerbFree, apiv1.VerbDebug}

// CanIOptions are the parsed arguments and flags of `auth can-i`.
type CanIOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	Verb   string
	Output string
	Quiet  bool
}

// Answer is the -o json/yaml document of `auth can-i`.
type Answer struct {
	apiv1.VerbAccess
	Principal string `json:"principal"`
	// NodeID is the coordinator that answered, Server its admin URL.
	NodeID string `json:"nodeId"`
	Server string `json:"server"`
}

// NewCmdCanI returns the command; runF replaces its run function in tests.
func NewCmdCanI(f *cmdutil.Factory, runF func(*CanIOptions) error) *cobra.Command {
	opts := &CanIOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "can-i VERB",
		Short: "Say whether the token may use a verb: exit 0 for yes, 1 for no",
		Long: fmt.Sprintf(`Say whether the token may use VERB (one of %s) on the
coordinator that answers: yes (exit 0) or no (exit 1), like kubectl auth
can-i. A no names the reason on stderr (the missing scope, a route the
listener does not expose, a listener without tokens, which refuses every
write) unless --quiet. Any valid token may ask; an invalid one is exit 4.

read covers every talonctl read (cluster, nodes, placement, events, top);
drain needs cordon's scope and read; debug reads the profiles and the
configuration (debug bundle).`, strings.Join(Verbs, ", ")),
		Example: `  talonctl auth can-i drain && talonctl nodes drain w-3
  talonctl auth can-i cordon -o json`,
		Args:      cmdutil.ExactArgs(1, "VERB"),
		ValidArgs: Verbs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Verb = args[0]
			if err := checkVerb(opts.Verb); err != nil {
				return err
			}
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return canIRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing; answer with the exit code only")
	return cmd
}

func checkVerb(v string) error {
	for _, known := range Verbs {
		if v == known {
			return nil
		}
	}
	return cmdutil.UsageErrorf("VERB %q: must be one of %s", v, strings.Join(Verbs, ", "))
}

func canIRun(ctx context.Context, opts *CanIOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	w, err := client.WhoAmI(ctx)
	if err != nil {
		return err
	}
	a, ok := w.Access(opts.Verb)
	if !ok {
		return fmt.Errorf("%s (%s) does not serve verb %q", w.NodeID, w.Role, opts.Verb)
	}
	if err := printAnswer(opts, Answer{VerbAccess: a, Principal: w.Principal, NodeID: w.NodeID, Server: client.Answered()}); err != nil {
		return err
	}
	if !a.Allowed {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: errors.New("no"), Silent: true}
	}
	return nil
}

func printAnswer(opts *CanIOptions, a Answer) error {
	switch {
	case opts.Quiet:
		return nil
	case opts.Output != cmdutil.OutputText:
		return cmdutil.WriteData(opts.IO.Out, opts.Output, a)
	case a.Allowed:
		_, err := fmt.Fprintln(opts.IO.Out, "yes")
		return err
	}
	if _, err := fmt.Fprintln(opts.IO.Out, "no"); err != nil {
		return err
	}
	_, err := fmt.Fprintf(opts.IO.ErrOut, "%s on %s: %s\n", a.Principal, a.NodeID, a.Reason)
	return err
}
