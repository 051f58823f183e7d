// Package bundle implements `talonctl debug bundle`: one tar.gz of what a
// maintainer asks for first, from every coordinator, with a manifest of
// what was collected and what failed.
package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Limits of --duration.
const (
	DefaultDuration = 10 * time.Second
	MaxDuration     = 10 * time.Minute
)

// BundleOptions are the parsed flags of `debug bundle`.
type BundleOptions struct {
	IO           *cmdutil.IOStreams
	Coordinators func(ctx context.Context) ([]*cmdutil.Endpoint, error, error)
	Now          func() time.Time
	Build        buildinfo.Info

	Output   string
	Duration time.Duration
}

// Part is one file of the bundle, or what kept it out.
type Part struct {
	Name  string `json:"name"`
	Path  string `json:"path,omitempty"`
	Bytes int    `json:"bytes"`
	Error string `json:"error,omitempty"`
}

// Coordinator is what the bundle holds of one coordinator.
type Coordinator struct {
	NodeID  string `json:"nodeId"`
	URL     string `json:"url"`
	Version string `json:"version"`
	Parts   []Part `json:"parts"`
}

// Manifest is manifest.json, the bundle's table of contents.
type Manifest struct {
	CreatedAtUnixMs int64          `json:"createdAtUnixMs"`
	Client          buildinfo.Info `json:"client"`
	DurationSeconds float64        `json:"durationSeconds"`
	// ListError is why the coordinators' records could not be listed (the
	// --server URLs were asked alone); empty when they were.
	ListError    string        `json:"listError,omitempty"`
	Coordinators []Coordinator `json:"coordinators"`
}

// NewCmdBundle returns the command; runF replaces its run function in tests.
func NewCmdBundle(f *cmdutil.Factory, runF func(*BundleOptions) error) *cobra.Command {
	opts := &BundleOptions{IO: &f.IO, Coordinators: f.Coordinators, Now: f.Now, Build: buildinfo.Get()}
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Write one archive of versions, API snapshots, metrics, profiles and configuration of every coordinator",
		Long: `Write one tar.gz (--output, default talon-debug-TIME.tar.gz, mode 0600) with a
manifest.json of what was collected and what failed, and for every
coordinator (its record's admin address, and every --server):

  whoami.json, cluster.json, nodes.json, events.json   /api/v1 as it answered
  nodes-2.json, nodes-3.json, ...                      the node list's further pages (up to 100)
  jobs.json                                            the cache jobs (warm, free)
  metrics-start.txt, metrics-end.txt                   /metrics, --duration apart
  goroutine.pb.gz, heap.pb.gz                          go tool pprof reads them
  config.yaml                                          its configuration, secrets redacted by the coordinator

Tokens are never written: the coordinators redact their configuration
(tokens, passwords, URL credentials and query values) before sending it.
The token needs the scopes read, metrics and debug; a part the token may
not read, or a coordinator that does not answer, is listed in the manifest
with its error and the others are still written.`,
		Example: `  talonctl debug bundle
  talonctl debug bundle --duration 30s -o /tmp/talon-debug.tar.gz`,
		Args:              cmdutil.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Duration < 0 || opts.Duration > MaxDuration {
				return cmdutil.UsageErrorf("--duration %s: must be from 0 to %s", opts.Duration, MaxDuration)
			}
			if opts.Output == "" {
				opts.Output = "talon-debug-" + opts.Now().UTC().Format("20060102T150405Z") + ".tar.gz"
			}
			if runF != nil {
				return runF(opts)
			}
			return bundleRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Output, "output", "o", "", "archive to write (default talon-debug-TIME.tar.gz in the current directory)")
	fl.DurationVar(&opts.Duration, "duration", DefaultDuration, "time between the two metrics samples, 0 to "+MaxDuration.String())
	_ = cmd.MarkFlagFilename("output", "tar.gz")
	return cmd
}

// archive collects the bundle's files; safe for concurrent use.
type archive struct {
	mu    sync.Mutex // guards files
	files map[string][]byte
}

func (a *archive) add(name string, b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[name] = b
}

func bundleRun(ctx context.Context, opts *BundleOptions) error {
	eps, listErr, err := opts.Coordinators(ctx)
	if err != nil {
		return err
	}
	m := Manifest{CreatedAtUnixMs: opts.Now().UnixMilli(), Client: opts.Build, DurationSeconds: opts.Duration.Seconds(), Coordinators: []Coordinator{}}
	if listErr != nil {
		m.ListError = listErr.Error()
	}
	a := &archive{files: map[string][]byte{}}
	coords := make([]Coordinator, len(eps))
	cmdutil.Each(eps, func(i int, ep *cmdutil.Endpoint) { coords[i] = collect(ctx, ep, opts.Duration, a) })
	seen := map[string]bool{}
	good := 0
	for _, c := range coords {
		if seen[c.NodeID] {
			continue // one coordinator under two addresses
		}
		seen[c.NodeID] = true
		m.Coordinators = append(m.Coordinators, c)
		for _, p := range c.Parts {
			if p.Error == "" {
				good++
				continue
			}
			fmt.Fprintf(opts.IO.ErrOut, "warning: %s %s: %s\n", c.NodeID, p.Name, p.Error)
		}
	}
	if err := writeArchive(opts.Output, m, a); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: %d coordinators, %d parts\n", opts.Output, len(m.Coordinators), good)
	if good == 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("no coordinator answered: the archive holds the manifest only")}
	}
	return nil
}

// source is one part fetched from a coordinator.
type source struct {
	name, path string
	query      url.Values
}

var (
	snapshots = []source{
		{"whoami.json", apiv1.PathWhoAmI, nil},
		{"cluster.json", apiv1.PathCluster, url.Values{apiv1.ParamAllowStale: {"true"}}},
		{"nodes.json", apiv1.PathNodes, url.Values{apiv1.ParamLimit: {strconv.Itoa(apiv1.MaxLimit)}, apiv1.ParamAllowStale: {"true"}}},
		{"events.json", apiv1.PathEvents, url.Values{apiv1.ParamLimit: {strconv.Itoa(apiv1.MaxEventLimit)}}},
		{"jobs.json", apiv1.PathJobs, nil},
		{"goroutine.pb.gz", apiv1.PathDebugProfile + "/" + apiv1.ProfileGoroutine, nil},
		{"heap.pb.gz", apiv1.PathDebugProfile + "/" + apiv1.ProfileHeap, nil},
		{"config.yaml", apiv1.PathDebugConfig, nil},
	}
	metricsStart = source{"metrics-start.txt", apiv1.PathMetrics, nil}
	metricsEnd   = source{"metrics-end.txt", apiv1.PathMetrics, nil}
)

// collect fetches every part of one coordinator into a, the metrics
// duration apart.
func collect(ctx context.Context, ep *cmdutil.Endpoint, duration time.Duration, a *archive) Coordinator {
	c := Coordinator{NodeID: ep.NodeID, URL: ep.URL, Version: ep.Version}
	var who apiv1.WhoAmI
	if b, err := ep.Client.Get(ctx, apiv1.PathWhoAmI, nil); err == nil && json.Unmarshal(b, &who) == nil && who.NodeID != "" {
		c.NodeID = who.NodeID // a --server URL learns its name
	}
	if c.NodeID == "" {
		c.NodeID = ep.URL
	}
	dir := "coordinators/" + path.Clean(url.PathEscape(c.NodeID))
	fetch := func(s source) []byte {
		b, err := ep.Client.Get(ctx, s.path, s.query)
		p := Part{Name: s.name, Bytes: len(b)}
		if err != nil {
			p.Error = err.Error()
			b = nil
		} else {
			p.Path = dir + "/" + s.name
			a.add(p.Path, b)
		}
		c.Parts = append(c.Parts, p)
		return b
	}
	fetch(metricsStart)
	start := time.Now()
	for _, s := range snapshots {
		b := fetch(s)
		if s.path == apiv1.PathNodes {
			nextPages(b, s, fetch)
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(duration - time.Since(start)):
	}
	fetch(metricsEnd)
	return c
}

// maxNodePages bounds the node list's pages a bundle keeps (100,000
// nodes at the API's page size).
const maxNodePages = 100

// nextPages fetches the node list's pages after first, as nodes-2.json,
// nodes-3.json and on, each as the API answered it, following continue.
func nextPages(first []byte, s source, fetch func(source) []byte) {
	page := first
	for n := 2; n <= maxNodePages; n++ {
		var l struct {
			Continue string `json:"continue"`
		}
		if json.Unmarshal(page, &l) != nil || l.Continue == "" {
			return
		}
		q := url.Values{}
		for k, v := range s.query {
			q[k] = v
		}
		q.Set(apiv1.ParamContinue, l.Continue)
		if page = fetch(source{name: fmt.Sprintf("nodes-%d.json", n), path: s.path, query: q}); page == nil {
			return
		}
	}
}

// writeArchive writes the manifest and the files to a new tar.gz at
// name (mode 0600), in a fixed order.
func writeArchive(name string, m Manifest, a *archive) error {
	man, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	mtime := time.UnixMilli(m.CreatedAtUnixMs)
	put := func(n string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: int64(len(b)), ModTime: mtime, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := put("manifest.json", append(man, '\n')); err != nil {
		return err
	}
	for _, c := range m.Coordinators {
		for _, p := range c.Parts {
			if p.Path == "" {
				continue
			}
			if err := put(p.Path, a.files[p.Path]); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}
