package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// promOperator is the Prometheus Operator module whose CRDs the chart's
// ServiceMonitor and PrometheusRule are applied against. Its module zip
// (from the Go module proxy, cached in the module cache like any
// dependency) carries the CRDs under example/prometheus-operator-crd.
const promOperator = "github.com/prometheus-operator/prometheus-operator@v0.82.0"

// installPromOperatorCRDs installs the ServiceMonitor and PrometheusRule
// CRDs into the API server and waits until they are established.
func installPromOperatorCRDs(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", promOperator)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", promOperator, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", promOperator, err, out)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range []string{"servicemonitors", "prometheusrules"} {
		raw, err := os.ReadFile(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := yaml.YAMLToJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		force := true
		if _, err := crds.Patch(ctx, name+".monitoring.coreos.com", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "talon-chart-test", Force: &force}); err != nil {
			t.Fatalf("install CRD %s: %v", name, err)
		}
	}
	for _, name := range []string{"servicemonitors", "prometheusrules"} {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			crd, err := crds.Get(ctx, name+".monitoring.coreos.com", metav1.GetOptions{})
			if err == nil && established(crd.Object) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established within 30s: %v", name, err)
			}
		}
	}
}

func established(o map[string]any) bool {
	conds, _ := dig(o, "status", "conditions").([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
