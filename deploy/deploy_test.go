package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
)

// manifests returns every YAML document of the Kubernetes manifests.
func manifests(t *testing.T) map[string][]map[string]any {
	t.Helper()
	files, _ := filepath.Glob("kubernetes/*.yaml")
	out := map[string][]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m != nil {
				out[f] = append(out[f], m)
			}
		}
	}
	if len(out) < 3 {
		t.Fatalf("found %d manifest files, want rbac, coordinator and worker", len(out))
	}
	return out
}

func dig(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

// TestWorkloads checks each workload: its args parse as the role's flags
// and pass validation, and the grace period covers drain delay plus
// shutdown timeout (or the kubelet kills the process mid-drain).
func TestWorkloads(t *testing.T) {
	checked := 0
	for file, docs := range manifests(t) {
		for _, d := range docs {
			kind, _ := d["kind"].(string)
			if kind != "Deployment" && kind != "StatefulSet" {
				continue
			}
			spec := dig(d, "spec", "template", "spec")
			grace, _ := dig(spec, "terminationGracePeriodSeconds").(float64)
			containers, _ := dig(spec, "containers").([]any)
			for _, c := range containers {
				var args []string
				for _, a := range dig(c, "args").([]any) {
					args = append(args, strings.ReplaceAll(a.(string), "$(POD_IP)", "10.1.2.3"))
				}
				role, err := cluster.ParseRole(args[0])
				if err != nil {
					t.Fatalf("%s: first arg %q is not a role", file, args[0])
				}
				fs := pflag.NewFlagSet(args[0], pflag.ContinueOnError)
				config.RegisterFlags(fs, role)
				if err := fs.Parse(args[1:]); err != nil {
					t.Fatalf("%s: %s args: %v", file, role, err)
				}
				env := []string{"TALON_NODE_ID=pod-0", "TALON_KUBE_NAMESPACE=talon"}
				l, err := config.Load(role, config.Options{Flags: fs, Environ: env})
				if err != nil {
					t.Fatalf("%s: %s configuration: %v", file, role, err)
				}
				// The manifests run with mutual TLS, from the pod's tls volume.
				if l.Config.InsecureControlPlane || !strings.HasPrefix(l.Config.TLS.CertFile, "/etc/talon/tls/") {
					t.Fatalf("%s: %s runs without mutual TLS from /etc/talon/tls (tls %+v, insecure %t)", file, role, l.Config.TLS, l.Config.InsecureControlPlane)
				}
				need := l.Config.DrainDelay + l.Config.ShutdownTimeout
				if time.Duration(grace)*time.Second <= need {
					t.Fatalf("%s: terminationGracePeriodSeconds %v must exceed drain-delay %s + shutdown-timeout %s", file, grace, l.Config.DrainDelay, l.Config.ShutdownTimeout)
				}
				checked++
			}
		}
	}
	if checked < 2 {
		t.Fatalf("checked %d workloads, want the coordinator and the worker", checked)
	}
}

// TestExampleConfigs loads the example config files of deploy/systemd as
// the daemon would, with their secret files present.
func TestExampleConfigs(t *testing.T) {
	tmp := t.TempDir()
	for _, f := range []string{"etcd-password", "admin-tokens"} {
		if err := os.WriteFile(filepath.Join(tmp, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for file, role := range map[string]cluster.Role{"systemd/coordinator.yaml": cluster.RoleCoordinator, "systemd/worker.yaml": cluster.RoleWorker} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(tmp, filepath.Base(file))
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/etc/talon/"), []byte(tmp+"/")), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(role, config.Options{ConfigFile: p}); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}

func TestAlertRulesParse(t *testing.T) {
	b, err := os.ReadFile("prometheus/talon-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || !strings.Contains(r.Expr, "talon_") {
				t.Fatalf("rule %+v", r)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no rules")
	}
}
