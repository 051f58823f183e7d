package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/pki/capool"
)

// exitError ends talon with code, its message already printed (talon
// ctl's talonctl printed its own).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// newCtlCmd runs talonctl's command tree from the talon binary: the
// container image ships only talon, and the Helm chart's test hooks run
// talonctl inside the cluster this way.
func newCtlCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ctl [talonctl arguments]",
		Short: "Run talonctl, the operator CLI, from the talon binary (for images that ship only talon)",
		Long: `ctl runs talonctl with the given arguments, exactly as the talonctl binary
would (same commands, flags, environment and exit codes). The container
image holds only talon; the Helm chart's test hooks use it, e.g.

  talon ctl --server http://talon-coordinator:7401 cluster status`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := cli.Main(cmd.Context(), args, cli.DefaultFactory()); code != 0 {
				return &exitError{code}
			}
			return nil
		},
	}
}

// probeOptions are talon probe's flags.
type probeOptions struct {
	caFile  string
	timeout time.Duration
}

// newProbeCmd checks that admin endpoints answer 200: for the chart's
// helm test hook, container health checks and scripts, in an image with
// no shell or curl.
func newProbeCmd(env Env) *cobra.Command {
	var o probeOptions
	cmd := &cobra.Command{
		Use:   "probe URL...",
		Short: "GET each URL (e.g. a /readyz) and exit 0 only if every one answers 200",
		Long: `probe sends GET to each URL and prints its status. It exits 0 when every
URL answers 200, 1 naming the first that does not (for /readyz: 503 with
the status word), 2 on bad arguments. HTTPS URLs are verified against
--ca-file, else the system roots.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hc, err := o.client()
			if err != nil {
				return &usageError{err}
			}
			defer hc.CloseIdleConnections()
			var failed error
			for _, u := range args {
				if err := probe(cmd.Context(), hc, u); err != nil {
					fmt.Fprintf(env.Stdout, "%s: %v\n", u, err)
					failed = errors.Join(failed, err)
					continue
				}
				fmt.Fprintf(env.Stdout, "%s: 200 OK\n", u)
			}
			if failed != nil {
				return fmt.Errorf("probe failed: %w", failed)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.caFile, "ca-file", "", "PEM CA bundle that verifies HTTPS URLs (default: the system roots)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Second, "time limit of each request")
	return cmd
}

func (o probeOptions) client() (*http.Client, error) {
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: must be positive", o.timeout)
	}
	tr := &http.Transport{}
	if o.caFile != "" {
		pool, err := capool.Load(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file %q: %w", o.caFile, err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: o.timeout}, nil
}

// probe GETs u and returns nil for a 200.
func probe(ctx context.Context, hc *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", u, res.Status)
	}
	return nil
}
