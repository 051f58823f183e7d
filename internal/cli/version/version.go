// Package version implements `talonctl version`.
package version

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `version`.
var Formats = []string{cmdutil.OutputText, cmdutil.OutputJSON, cmdutil.OutputYAML}

// VersionOptions are the parsed flags of `version`.
type VersionOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)
	Build  buildinfo.Info

	Output     string
	ClientOnly bool
}

// Versions is the -o json/yaml document.
type Versions struct {
	Client buildinfo.Info `json:"client"`
	// Server is the answering coordinator's version; absent when no
	// server was asked (--client) or none could be reached.
	Server *ServerVersion `json:"server,omitempty"`
	// Cluster is every live process's build version and the cluster's
	// feature level, as the answering coordinator sees them; absent with
	// Server.
	Cluster *ClusterVersions `json:"cluster,omitempty"`
}

// ServerVersion is the build version of the coordinator that answered.
type ServerVersion struct {
	Version   string `json:"version"`
	NodeID    string `json:"nodeId"`
	ClusterID string `json:"clusterId"`
	// FeatureLevel is the feature level the coordinator's build speaks
	// (0 for builds before feature levels).
	FeatureLevel int64 `json:"featureLevel"`
}

// ClusterVersions is what the live records say of the builds that run.
type ClusterVersions struct {
	// FeatureLevel is the cluster's level: the lowest among live processes.
	FeatureLevel int64 `json:"featureLevel"`
	// Mixed is true while more than one build version or level runs.
	Mixed bool `json:"mixed"`
	// Coordinators lists every live coordinator's version and level.
	Coordinators []NodeVersion `json:"coordinators"`
	// Workers counts the live workers by version and level.
	Workers []apiv1.VersionCount `json:"workers"`
}

// NodeVersion is one process's build version and feature level.
type NodeVersion struct {
	NodeID       string `json:"nodeId"`
	Version      string `json:"version"`
	FeatureLevel int64  `json:"featureLevel"`
}

// NewCmdVersion returns the command; runF replaces its run function in tests.
func NewCmdVersion(f *cmdutil.Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: &f.IO, Client: f.Client, Build: buildinfo.Get()}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print talonctl's version, the coordinators' and workers' versions and the cluster's feature level",
		Long: `Print talonctl's version, commit, build date, Go version and platform; the
build version and feature level of the coordinator that answers the API (from
its node record); and, for the whole cluster, its feature level (the lowest
among live processes), every coordinator's version and level, and the workers
counted by version and level. During a rolling upgrade it says the cluster is
mid-upgrade. talonctl speaks /api/v1 only, so it works with coordinators of
any release that serves /api/v1 (docs/operations.md, "Upgrades and version
skew").
With --client, only the client's version is printed and no server is
contacted. When the server's version was asked for and cannot be had, the
client's version is still printed, the error goes to stderr and the exit code
says why: 3 when no server answered (or 503), 4 when the token was refused.`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return versionRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmd.Flags().BoolVar(&opts.ClientOnly, "client", false, "print the client's version only; do not contact a server")
	return cmd
}

func versionRun(ctx context.Context, opts *VersionOptions) error {
	v := Versions{Client: opts.Build}
	var serverErr error
	if !opts.ClientOnly {
		sv, cv, err := serverVersion(ctx, opts)
		if err != nil {
			if cmdutil.ExitCode(err) == cmdutil.ExitUsage {
				return err
			}
			// The client's part is still printed; the error sets the
			// exit code (3 when no server answered).
			serverErr = fmt.Errorf("server version unknown: %w", err)
		}
		v.Server, v.Cluster = sv, cv
	}
	if err := writeVersions(opts, v); err != nil {
		return err
	}
	return serverErr
}

func writeVersions(opts *VersionOptions, v Versions) error {
	out := opts.IO.Out
	if opts.Output != cmdutil.OutputText {
		return cmdutil.WriteData(out, opts.Output, v)
	}
	if err := v.Client.Write(out, "talonctl", "text"); err != nil {
		return err
	}
	if v.Server != nil {
		if _, err := fmt.Fprintf(out, "server (coordinator %s, cluster %s)\n  version: %s\n  feature level: %d\n", v.Server.NodeID, v.Server.ClusterID, v.Server.Version, v.Server.FeatureLevel); err != nil {
			return err
		}
	}
	if c := v.Cluster; c != nil {
		return writeCluster(opts.IO, c)
	}
	return nil
}

// writeCluster prints the cluster's feature level, every coordinator's
// version and the workers counted by version.
func writeCluster(s *cmdutil.IOStreams, c *ClusterVersions) error {
	var b strings.Builder
	state := "every live process runs one build"
	if c.Mixed {
		state = "mid-upgrade: more than one build runs; behaviour of a higher level waits until every process speaks it"
	}
	fmt.Fprintf(&b, "cluster\n  feature level: %d (%s)\n", c.FeatureLevel, state)
	t := cmdutil.NewTable("ROLE", "NODE", "VERSION", "LEVEL", "COUNT")
	for _, n := range c.Coordinators {
		t.AddRow("coordinator", n.NodeID, n.Version, strconv.FormatInt(n.FeatureLevel, 10), "1")
	}
	for _, w := range c.Workers {
		t.AddRow("worker", "-", w.Version, strconv.FormatInt(w.FeatureLevel, 10), strconv.Itoa(w.Count))
	}
	var tb strings.Builder
	if err := t.Render(&tb, false); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(tb.String(), "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
	}
	_, err := io.WriteString(s.Out, b.String())
	return err
}

// serverVersion reads the version of the coordinator that serves the
// cluster view from its node record, and every live process's version
// and level: coordinators from their records, workers counted from the
// answer's upgrade survey (or, from a coordinator before feature levels,
// from the worker records).
func serverVersion(ctx context.Context, opts *VersionOptions) (*ServerVersion, *ClusterVersions, error) {
	client, err := opts.Client()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.Cluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	coords, err := client.AllNodes(ctx, apiv1.NodeFilter{Role: "coordinator"})
	if err != nil {
		return nil, nil, err
	}
	i := slices.IndexFunc(coords.Items, func(n apiv1.Node) bool { return n.NodeID == c.ServedBy })
	if i < 0 {
		return nil, nil, fmt.Errorf("coordinator %q answered but its node record is not listed", c.ServedBy)
	}
	self := coords.Items[i]
	sv := &ServerVersion{Version: self.Version, NodeID: c.ServedBy, ClusterID: c.ClusterID, FeatureLevel: self.FeatureLevel}
	cv := &ClusterVersions{Coordinators: []NodeVersion{}, Workers: []apiv1.VersionCount{}}
	for _, n := range coords.Items {
		cv.Coordinators = append(cv.Coordinators, NodeVersion{NodeID: n.NodeID, Version: n.Version, FeatureLevel: n.FeatureLevel})
	}
	if u := c.Upgrade; u != nil {
		cv.FeatureLevel, cv.Mixed = u.FeatureLevel, u.Mixed
		for _, v := range u.Versions {
			if v.Role == "worker" {
				cv.Workers = append(cv.Workers, v)
			}
		}
		return sv, cv, nil
	}
	// A coordinator before feature levels: count the worker records.
	ws, err := client.AllNodes(ctx, apiv1.NodeFilter{Role: "worker"})
	if err != nil {
		return nil, nil, err
	}
	var all []apiv1.Node
	all = append(append(all, coords.Items...), ws.Items...)
	cv.FeatureLevel, cv.Mixed, cv.Workers = surveyNodes(all)
	return sv, cv, nil
}

// surveyNodes computes the cluster's level, whether it is mixed, and the
// workers counted by version and level, from node records.
func surveyNodes(nodes []apiv1.Node) (level int64, mixed bool, workers []apiv1.VersionCount) {
	type key struct {
		version string
		level   int64
	}
	counts := map[key]int{}
	versions := map[string]bool{}
	levels := map[int64]bool{}
	level = -1
	for _, n := range nodes {
		versions[n.Version], levels[n.FeatureLevel] = true, true
		if level < 0 || n.FeatureLevel < level {
			level = n.FeatureLevel
		}
		if n.Role == "worker" {
			counts[key{n.Version, n.FeatureLevel}]++
		}
	}
	workers = []apiv1.VersionCount{}
	for k, n := range counts {
		workers = append(workers, apiv1.VersionCount{Role: "worker", Version: k.version, FeatureLevel: k.level, Count: n})
	}
	slices.SortFunc(workers, func(a, b apiv1.VersionCount) int {
		if a.Version != b.Version {
			return strings.Compare(a.Version, b.Version)
		}
		return int(a.FeatureLevel - b.FeatureLevel)
	})
	return max(level, 0), len(versions) > 1 || len(levels) > 1, workers
}
