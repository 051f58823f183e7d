// Package version implements `talonctl version`.
package version

import (
	"context"
	"fmt"
	"slices"

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
}

// ServerVersion is the build version of the coordinator that answered.
type ServerVersion struct {
	Version   string `json:"version"`
	NodeID    string `json:"nodeId"`
	ClusterID string `json:"clusterId"`
}

// NewCmdVersion returns the command; runF replaces its run function in tests.
func NewCmdVersion(f *cmdutil.Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: &f.IO, Client: f.Client, Build: buildinfo.Get()}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print talonctl's version and the version of the coordinator that answers",
		Long: `Print talonctl's version, commit, build date, Go version and platform, and the
build version of the coordinator that answers the API (from its node record).
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
		sv, err := serverVersion(ctx, opts)
		if err != nil {
			if cmdutil.ExitCode(err) == cmdutil.ExitUsage {
				return err
			}
			// The client's part is still printed; the error sets the
			// exit code (3 when no server answered).
			serverErr = fmt.Errorf("server version unknown: %w", err)
		}
		v.Server = sv
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
		_, err := fmt.Fprintf(out, "server (coordinator %s, cluster %s)\n  version: %s\n", v.Server.NodeID, v.Server.ClusterID, v.Server.Version)
		return err
	}
	return nil
}

// serverVersion reads the version from the node record of the
// coordinator that serves the cluster view.
func serverVersion(ctx context.Context, opts *VersionOptions) (*ServerVersion, error) {
	client, err := opts.Client()
	if err != nil {
		return nil, err
	}
	c, err := client.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	coords, err := client.AllNodes(ctx, apiv1.NodeFilter{Role: "coordinator"})
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(coords.Items, func(n apiv1.Node) bool { return n.NodeID == c.ServedBy })
	if i < 0 {
		return nil, fmt.Errorf("coordinator %q answered but its node record is not listed", c.ServedBy)
	}
	return &ServerVersion{Version: coords.Items[i].Version, NodeID: c.ServedBy, ClusterID: c.ClusterID}, nil
}
