// Package cli implements talonctl, the operator CLI that speaks only to the
// coordinators' /api/v1. Commands follow the noun/verb shape and the cli/cli
// pattern: an options struct per command, NewCmdX(f, runF), a private xRun.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/buildinfo"
)

// Exit codes of talonctl, documented in `talonctl --help` and the man page.
const (
	ExitOK           = 0 // success, including an empty result
	ExitFailure      = 1 // any other error
	ExitUsage        = 2 // bad command line
	ExitUnavailable  = 3 // cluster state unavailable: no server reachable, or 503 fail-closed
	ExitAuthRejected = 4 // authentication or permission refused
)

// IOStreams are the command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Factory carries what commands need from the process.
type Factory struct {
	IO      IOStreams
	Environ []string
}

// ExitError carries an exit code with an error.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs talonctl with args and returns the exit code.
func Main(ctx context.Context, args []string, f *Factory) int {
	root := NewCmdRoot(f)
	root.SetArgs(args)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(f.IO.ErrOut, "talonctl: %v\n", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

// NewCmdRoot builds the talonctl command tree.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "talonctl",
		Short: "Operate a Talon cluster through the coordinators' /api/v1",
		Long: `talonctl lists nodes, explains placement and watches a Talon cluster live,
talking only to the coordinators' management API (/api/v1).

Exit codes:
  0  success (an empty result is not an error)
  1  error
  2  usage error (bad command line)
  3  cluster state unavailable (no server reachable, or 503 fail-closed)
  4  authentication or permission refused`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} })
	root.AddCommand(newCmdVersion(f))
	return root
}

func newCmdVersion(f *Factory) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print talonctl's version, commit, build date and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--output %q: must be text or json", output)}
			}
			return buildinfo.Get().Write(f.IO.Out, "talonctl", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// DefaultFactory is the factory of the real process.
func DefaultFactory() *Factory {
	return &Factory{IO: IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, Environ: os.Environ()}
}
