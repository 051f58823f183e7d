package jobs

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/job"
)

// NewCmdJobs returns `talonctl jobs` and its verbs.
func NewCmdJobs(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, follow and cancel cache jobs (warm, free)",
		Long: `The cluster's cache jobs, started by talonctl warm and talonctl free: the
running ones and those that ended in the last 24 hours, with each
worker's progress.`,
		Args: cmdutil.NoArgs,
	}
	cmd.AddCommand(newCmdList(f), newCmdGet(f), newCmdCancel(f))
	return cmd
}

// JobOptions are the parsed arguments and flags of `jobs list|get|cancel`.
type JobOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	ID        string
	Output    string
	Wait      bool
	Interval  time.Duration
	NoHeaders bool
}

func newCmdList(f *cmdutil.Factory) *cobra.Command {
	opts := &JobOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cluster's cache jobs, oldest first",
		Example: `  talonctl jobs list
  talonctl jobs list -o json`,
		Args:              cmdutil.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			return listRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row")
	return cmd
}

func listRun(ctx context.Context, opts *JobOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	l, err := client.Jobs(ctx)
	if err != nil {
		return err
	}
	if opts.Output == cmdutil.OutputJSON {
		return writeJSON(opts.IO.Out, l)
	}
	t := cmdutil.NewTable("ID", "OP", "TARGETS", "STATE", "BLOCKS", "WORKERS", "BY", "AGE")
	now := time.Now()
	for i := range l.Items {
		j := &l.Items[i]
		t.AddRow(j.ID, j.Op, describeTargets(j)[len(j.Op)+1:], j.State, fmt.Sprintf("%d/%d", j.BlocksDone, j.BlocksTotal),
			fmt.Sprintf("%d/%d", j.WorkersDone, len(j.Workers)), j.By, cmdutil.Duration(now.Sub(time.UnixMilli(j.CreatedAtUnixMs))))
	}
	return t.Render(opts.IO.Out, opts.NoHeaders)
}

// runOne checks the flags and the JOB argument, calls act and prints the
// job it returns (nil: act printed what it had to) as -o asks, table with
// table.
func runOne(cmd *cobra.Command, args []string, opts *JobOptions, act func(context.Context, *apiv1.Client) (*apiv1.Job, error), table func(io.Writer, *apiv1.Job) error) error {
	if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
		return err
	}
	if err := idArg(opts, args); err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	j, err := act(cmd.Context(), client)
	if err != nil || j == nil {
		return err
	}
	if opts.Output == cmdutil.OutputJSON {
		return writeJSON(opts.IO.Out, j)
	}
	return table(opts.IO.Out, j)
}

func idArg(opts *JobOptions, args []string) error {
	if err := job.ValidateID(args[0]); err != nil {
		return cmdutil.UsageErrorf("JOB %v (talonctl jobs list shows the IDs)", err)
	}
	opts.ID = args[0]
	return nil
}

func newCmdGet(f *cmdutil.Factory) *cobra.Command {
	opts := &JobOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "get JOB",
		Short: "Show a cache job and each worker's progress",
		Example: `  talonctl jobs get j-lx2k3m-9f3a2b
  talonctl jobs get j-lx2k3m-9f3a2b --wait`,
		Args:              cmdutil.ExactArgs(1, "JOB"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOne(cmd, args, opts, func(ctx context.Context, c *apiv1.Client) (*apiv1.Job, error) {
				if opts.Wait {
					return nil, follow(ctx, c, opts.IO, opts.ID, opts.Interval, opts.Output)
				}
				return c.Job(ctx, opts.ID)
			}, writeDetail)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "follow the job until it ends; exit 1 unless every worker finished its part")
	cmd.Flags().DurationVar(&opts.Interval, "interval", DefaultPollInterval, "how often --wait reads the job's progress")
	return cmd
}

func newCmdCancel(f *cmdutil.Factory) *cobra.Command {
	opts := &JobOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a running cache job",
		Long: `Cancel a running cache job: the workers stop their parts at their next
heartbeat; what was loaded stays loaded. Cancelling an ended job changes
nothing. Needs a token with the operate scope.`,
		Example:           `  talonctl jobs cancel j-lx2k3m-9f3a2b`,
		Args:              cmdutil.ExactArgs(1, "JOB"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOne(cmd, args, opts, func(ctx context.Context, c *apiv1.Client) (*apiv1.Job, error) {
				return c.CancelJob(ctx, opts.ID)
			}, func(w io.Writer, j *apiv1.Job) error {
				_, err := fmt.Fprintf(w, "job %s %s: %s\n", j.ID, j.State, progressText(j))
				return err
			})
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	return cmd
}
