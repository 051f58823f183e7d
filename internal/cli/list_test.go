package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/cluster"
)

// TestListFollowsPagination lists more nodes than one API page holds.
func TestListFollowsPagination(t *testing.T) {
	e := startEnv(t, envOptions{})
	const n = apiv1.MaxLimit + 105
	for i := range n {
		id := fmt.Sprintf("w-%04d", i)
		e.put(t, &cluster.Record{ClusterID: clusterID, NodeID: id, Role: cluster.RoleWorker, IncarnationID: "inc",
			Address: id + ".data.test:7500", Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true})
	}
	server := "TALONCTL_SERVER=" + e.url
	r := talonctl(t, run{args: []string{"nodes", "list", "--role", "worker", "-o", "name"}, env: []string{server}})
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != n || lines[0] != "node/w-0000" || lines[n-1] != fmt.Sprintf("node/w-%04d", n-1) {
		t.Fatalf("%d names from %q to %q, want %d", len(lines), lines[0], lines[len(lines)-1], n)
	}
	r = talonctl(t, run{args: []string{"nodes", "list", "-o", "json"}, env: []string{server}})
	var list apiv1.NodeList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("decoding -o json: %v", err)
	}
	if len(list.Items) != n+1 || list.Continue != "" || list.SchemaVersion != apiv1.SchemaVersion {
		t.Fatalf("-o json: %d items, continue %q, schema %d; want %d, empty, %d", len(list.Items), list.Continue, list.SchemaVersion, n+1, apiv1.SchemaVersion)
	}
}

// TestVersion prints the client's version and the answering coordinator's.
func TestVersion(t *testing.T) {
	e := startEnv(t, envOptions{})
	server := "TALONCTL_SERVER=" + e.url
	t.Run("client and server", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"version"}, env: []string{server}})
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		for _, want := range []string{"talonctl\n  version: dev\n  commit: none\n", "\nserver (coordinator coord-a, cluster test)\n  version: dev\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"version", "-o", "json"}, env: []string{server}})
		var v struct {
			Client struct{ Version, GoVersion string }
			Server *struct{ Version, NodeID, ClusterID string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if v.Client.Version != "dev" || v.Client.GoVersion == "" || v.Server == nil || v.Server.NodeID != "coord-a" || v.Server.ClusterID != clusterID || v.Server.Version != "dev" {
			t.Fatalf("version document %+v %+v", v.Client, v.Server)
		}
	})
	t.Run("mixed versions", func(t *testing.T) {
		// The seeded workers run 1.4.0 and 1.5.0-rc.1 at the previous
		// release's feature level: the cluster is at that level and
		// mid-upgrade.
		m := startEnv(t, envOptions{seed: true})
		r := talonctl(t, run{args: []string{"version"}, env: []string{"TALONCTL_SERVER=" + m.url}})
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		own, prev := cluster.BuildLevel, cluster.BuildLevel-1
		for _, want := range []string{fmt.Sprintf("  feature level: %d\n", own), fmt.Sprintf("cluster\n  feature level: %d (mid-upgrade", prev),
			fmt.Sprintf("coordinator   coord-a   dev          %d       1\n", own),
			fmt.Sprintf("worker        -         1.4.0        %d       4\n", prev), fmt.Sprintf("worker        -         1.5.0-rc.1   %d       1\n", prev)} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		r = talonctl(t, run{args: []string{"version", "-o", "json"}, env: []string{"TALONCTL_SERVER=" + m.url}})
		var v struct {
			Cluster *struct {
				FeatureLevel int64
				Mixed        bool
				Coordinators []struct{ NodeID, Version string }
				Workers      []struct {
					Version string
					Count   int
				}
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if c := v.Cluster; c == nil || c.FeatureLevel != cluster.BuildLevel-1 || !c.Mixed || len(c.Coordinators) != 1 || len(c.Workers) != 2 ||
			c.Workers[0].Version != "1.4.0" || c.Workers[0].Count < 1 || c.Workers[1].Version != "1.5.0-rc.1" {
			t.Fatalf("cluster versions %+v; want the previous level, mixed, coord-a and workers of 1.4.0 and 1.5.0-rc.1", v.Cluster)
		}
	})
	t.Run("client only", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"version", "--client"}, env: []string{"TALONCTL_SERVER=" + closedURL(t)}})
		if r.code != 0 || r.stderr != "" || strings.Contains(r.stdout, "server") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("server down", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"version"}, env: []string{"TALONCTL_SERVER=" + closedURL(t)}})
		if r.code != cli.ExitUnavailable || !strings.HasPrefix(r.stdout, "talonctl\n") || strings.Contains(r.stdout, "server") {
			t.Fatalf("exit %d\nstdout:\n%s", r.code, r.stdout)
		}
		if !strings.Contains(r.stderr, "talonctl: server version unknown: admin api unavailable") {
			t.Errorf("stderr:\n%s", r.stderr)
		}
	})
	t.Run("server down json", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"version", "-o", "json"}, env: []string{"TALONCTL_SERVER=" + closedURL(t)}})
		if r.code != cli.ExitUnavailable || !strings.Contains(r.stdout, `"client"`) || strings.Contains(r.stdout, `"server"`) {
			t.Fatalf("exit %d\nstdout:\n%s", r.code, r.stdout)
		}
	})
	t.Run("completion scripts", func(t *testing.T) {
		for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
			r := talonctl(t, run{args: []string{"completion", sh}})
			if r.code != 0 || !strings.Contains(r.stdout, "talonctl") || len(r.stdout) < 1000 {
				t.Errorf("completion %s: exit %d, %d bytes", sh, r.code, len(r.stdout))
			}
		}
	})
	t.Run("help documents the exit codes", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"--help"}})
		for _, want := range []string{"Exit codes:", "3  cluster state unavailable", "4  authentication or permission refused"} {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("--help lacks %q (exit %d)", want, r.code)
			}
		}
	})
}
