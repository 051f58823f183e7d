package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"charm.land/bubbles/v2/progress"
	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of the job commands.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputJSON}

// DefaultPollInterval is how often --wait reads the job.
const DefaultPollInterval = 500 * time.Millisecond

// StartOptions are the parsed arguments and flags of `warm` and `free`.
type StartOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	Op       string
	Objects  []string
	Prefixes []string
	Wait     bool
	Interval time.Duration
	Output   string
}

// NewCmdWarm returns `talonctl warm`; runF replaces its run function in tests.
func NewCmdWarm(f *cmdutil.Factory, runF func(*StartOptions) error) *cobra.Command {
	return newStartCmd(f, runF, apiv1.JobWarm, "Load objects onto the workers that own their blocks",
		`Ask the coordinators to warm objects: each worker loads the blocks of the
objects that it owns (the placement the coordinators compute), at most
warmup-rate blocks a second, so that the reads that follow are cache hits.
An argument that ends in '/' or '*' is a prefix: every object under it (at
most 10,000 a prefix; not on http:// stores). A job takes 1 to 8
objects and prefixes; at most 6 jobs run at once in a cluster.

The job runs on the workers whatever happens to the coordinator that took
it; talonctl jobs get ID shows its progress and talonctl jobs cancel ID
stops it. With --wait talonctl follows it to the end (a progress bar on a
terminal) and exits 1 unless every worker finished its part. Needs a token
with the operate scope and cluster feature level 2.`,
		`  talonctl warm datasets/imagenet/train-00001.tar
  talonctl warm datasets/imagenet/ --wait
  talonctl warm models/llama/ -o json`)
}

// NewCmdFree returns `talonctl free`; runF replaces its run function in tests.
func NewCmdFree(f *cmdutil.Factory, runF func(*StartOptions) error) *cobra.Command {
	return newStartCmd(f, runF, apiv1.JobFree, "Evict objects from every worker's cache",
		`Ask the coordinators to free objects: every worker evicts the resident
blocks of the objects, so that the next reads load them from the blob
store again. An argument that ends in '/' or '*' is a prefix: every cached
object under it. With --wait talonctl follows the job to the end. Needs a
token with the operate scope and cluster feature level 2.`,
		`  talonctl free datasets/imagenet/train-00001.tar
  talonctl free datasets/old/ --wait -o json`)
}

func newStartCmd(f *cmdutil.Factory, runF func(*StartOptions) error, op, short, long, example string) *cobra.Command {
	opts := &StartOptions{IO: &f.IO, Client: f.Client, Op: op}
	cmd := &cobra.Command{
		Use:               op + " OBJECT|PREFIX/|PREFIX*...",
		Short:             short,
		Long:              long,
		Example:           example,
		Args:              cmdutil.MinimumArgs(1, "OBJECT"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if opts.Interval < 100*time.Millisecond || opts.Interval > time.Minute {
				return cmdutil.UsageErrorf("--interval %v: must be from 100ms to 1m", opts.Interval)
			}
			if err := opts.parseTargets(args); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return startRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "follow the job until it ends; exit 1 unless every worker finished its part")
	cmd.Flags().DurationVar(&opts.Interval, "interval", DefaultPollInterval, "how often --wait reads the job's progress")
	return cmd
}

// Job bounds as the coordinators apply them, checked here first so that a
// mistake is a usage error with its limit.
const (
	maxTargets = 8
	maxKey     = 1024
)

// parseTargets splits the arguments into objects and prefixes (a trailing
// '/' keeps its slash; a trailing '*' is dropped).
func (o *StartOptions) parseTargets(args []string) error {
	if len(args) > maxTargets {
		return cmdutil.UsageErrorf("%d objects and prefixes given; a job takes at most %d (warm a common prefix instead)", len(args), maxTargets)
	}
	for _, a := range args {
		key, star := strings.CutSuffix(a, "*")
		switch {
		case key == "":
			return cmdutil.UsageErrorf("argument %q: an empty prefix would name every object of the store; name a prefix", a)
		case len(key) > maxKey:
			return cmdutil.UsageErrorf("argument %.40q…: %d bytes; an object key or prefix has at most %d", a, len(key), maxKey)
		case star || strings.HasSuffix(key, "/"):
			o.Prefixes = append(o.Prefixes, key)
		default:
			o.Objects = append(o.Objects, key)
		}
	}
	return nil
}

func startRun(ctx context.Context, opts *StartOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	j, err := client.StartJob(ctx, opts.Op, opts.Objects, opts.Prefixes)
	if err != nil {
		return err
	}
	if !opts.Wait {
		if opts.Output == cmdutil.OutputJSON {
			return writeJSON(opts.IO.Out, j)
		}
		_, err := fmt.Fprintf(opts.IO.Out, "job %s started: %s on %d workers (talonctl jobs get %s)\n", j.ID, describeTargets(j), len(j.Workers), j.ID)
		return err
	}
	if opts.Output == cmdutil.OutputTable {
		fmt.Fprintf(opts.IO.ErrOut, "job %s started: %s on %d workers\n", j.ID, describeTargets(j), len(j.Workers))
	}
	return follow(ctx, client, opts.IO, j.ID, opts.Interval, opts.Output)
}

// follow polls job id until it ends, drawing a progress bar on a
// terminal, then prints it; a job that did not end done is exit 1.
func follow(ctx context.Context, client *apiv1.Client, io *cmdutil.IOStreams, id string, every time.Duration, output string) error {
	bar := progress.New(progress.WithWidth(30))
	draw := io.IsStdoutTTY() && output == cmdutil.OutputTable
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		j, err := client.Job(ctx, id)
		if err != nil {
			return err
		}
		if draw {
			fmt.Fprintf(io.Out, "\r%s %s\x1b[K", bar.ViewAs(fraction(j)), progressText(j))
		}
		if j.Ended() {
			if draw {
				fmt.Fprintln(io.Out)
			}
			return finish(io, j, output)
		}
		select {
		case <-ctx.Done():
			if draw {
				fmt.Fprintln(io.Out)
			}
			return fmt.Errorf("stopped following job %s (it goes on; talonctl jobs cancel %s stops it): %w", id, id, ctx.Err())
		case <-tick.C:
		}
	}
}

// finish prints an ended job and makes anything but done an exit 1.
func finish(io *cmdutil.IOStreams, j *apiv1.Job, output string) error {
	var err error
	if output == cmdutil.OutputJSON {
		err = writeJSON(io.Out, j)
	} else {
		err = writeDetail(io.Out, j)
	}
	if err != nil {
		return err
	}
	if j.State != apiv1.JobDone {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("job %s ended %s: %d of %d workers finished their part", j.ID, j.State, countDone(j), len(j.Workers))}
	}
	return nil
}

func countDone(j *apiv1.Job) int {
	n := 0
	for _, w := range j.Workers {
		if w.State == "done" {
			n++
		}
	}
	return n
}

func fraction(j *apiv1.Job) float64 {
	switch {
	case j.BlocksTotal > 0:
		return float64(j.BlocksDone) / float64(j.BlocksTotal)
	case len(j.Workers) > 0:
		return float64(j.WorkersDone) / float64(len(j.Workers))
	}
	return 0
}

// progressText is a job's progress in one line.
func progressText(j *apiv1.Job) string {
	return fmt.Sprintf("%d/%d blocks, %s/%s, %d/%d workers, %s", j.BlocksDone, j.BlocksTotal,
		bytesText(j.BytesDone), bytesText(j.BytesTotal), j.WorkersDone, len(j.Workers), j.State)
}

// bytesText renders n bytes in binary units.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func describeTargets(j *apiv1.Job) string {
	parts := make([]string, 0, len(j.Targets))
	for _, t := range j.Targets {
		if t.Prefix {
			parts = append(parts, t.Key+"*")
		} else {
			parts = append(parts, t.Key)
		}
	}
	return j.Op + " " + strings.Join(parts, " ")
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeDetail prints a job: its head, then a row per worker.
func writeDetail(w io.Writer, j *apiv1.Job) error {
	var b strings.Builder
	kv := cmdutil.NewTable()
	kv.AddRow("Job:", j.ID)
	kv.AddRow("Operation:", describeTargets(j))
	kv.AddRow("State:", j.State)
	kv.AddRow("Started:", time.UnixMilli(j.CreatedAtUnixMs).UTC().Format(time.RFC3339)+" by "+j.By+" through "+j.Coordinator)
	if j.EndedAtUnixMs > 0 {
		kv.AddRow("Ended:", time.UnixMilli(j.EndedAtUnixMs).UTC().Format(time.RFC3339)+" after "+time.Duration((j.EndedAtUnixMs-j.CreatedAtUnixMs)*int64(time.Millisecond)).String())
	}
	if j.CancelledBy != "" {
		kv.AddRow("Cancelled by:", j.CancelledBy)
	}
	kv.AddRow("Progress:", progressText(j))
	if err := kv.Render(&b, true); err != nil {
		return err
	}
	b.WriteByte('\n')
	t := cmdutil.NewTable("WORKER", "STATE", "BLOCKS", "BYTES", "ERROR")
	for _, wk := range j.Workers {
		t.AddRow(wk.NodeID, wk.State, fmt.Sprintf("%d/%d", wk.BlocksDone, wk.BlocksTotal),
			bytesText(wk.BytesDone)+"/"+bytesText(wk.BytesTotal), wk.Error)
	}
	if err := t.Render(&b, false); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
