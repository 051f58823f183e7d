package kube

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talonhq/talon/internal/cluster"
)

func TestLeaseName(t *testing.T) {
	long := strings.Repeat("Node_x.", 40)[:cluster.MaxIDBytes]
	tests := []struct {
		name string
		key  cluster.Key
		// prefix is the readable part the name must start with.
		prefix string
	}{
		{"plain", cluster.Key{ClusterID: "prod", Role: cluster.RoleWorker, NodeID: "w-1"}, "talon-prod-worker-w-1-"},
		{"upper and underscore", cluster.Key{ClusterID: "Prod_EU", Role: cluster.RoleCoordinator, NodeID: "Node_A.b"}, "talon-prod-eu-coordinator-node-a-b-"},
		{"trailing punctuation", cluster.Key{ClusterID: "c.", Role: cluster.RoleWorker, NodeID: "n_"}, "talon-c--worker-n--"},
		{"maximal ids", cluster.Key{ClusterID: long, Role: cluster.RoleWorker, NodeID: long}, "talon-node-x-node-x-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := LeaseName(tt.key)
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("LeaseName(%v) = %q: not a DNS-1123 subdomain: %v", tt.key, n, errs)
			}
			if !strings.HasPrefix(n, tt.prefix) {
				t.Errorf("LeaseName(%v) = %q, want prefix %q", tt.key, n, tt.prefix)
			}
			if len(n) > 162 {
				t.Errorf("LeaseName(%v) has %d bytes, want at most 162", tt.key, len(n))
			}
			if again := LeaseName(tt.key); again != n {
				t.Errorf("LeaseName is not deterministic: %q then %q", n, again)
			}
		})
	}
}

func TestLeaseNameInjective(t *testing.T) {
	// Keys whose readable parts coincide must still get distinct names.
	keys := []cluster.Key{
		{ClusterID: "a-worker-b", Role: cluster.RoleCoordinator, NodeID: "c"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: "b-coordinator-c"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: "B_coordinator.c"},
		{ClusterID: "A", Role: cluster.RoleWorker, NodeID: "b-coordinator-c"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: "n"},
		{ClusterID: "a", Role: cluster.RoleCoordinator, NodeID: "n"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: "N"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: "n_"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: "n-"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: strings.Repeat("x", 200) + "1"},
		{ClusterID: "a", Role: cluster.RoleWorker, NodeID: strings.Repeat("x", 200) + "2"},
	}
	seen := map[string]cluster.Key{}
	for _, k := range keys {
		n := LeaseName(k)
		if prev, ok := seen[n]; ok {
			t.Fatalf("LeaseName(%v) = LeaseName(%v) = %q", k, prev, n)
		}
		seen[n] = k
	}
}

func TestLabelValue(t *testing.T) {
	tests := []struct {
		name, id string
		same     bool // the ID is its own label value
	}{
		{"plain", "prod-1", true},
		{"upper and underscore are allowed in values", "Prod_EU.1", true},
		{"63 bytes", strings.Repeat("a", 63), true},
		{"64 bytes", strings.Repeat("a", 64), false},
		{"256 bytes", strings.Repeat("ab.", 85) + "c", false},
		{"trailing dot", "node.", false},
		{"trailing underscore", "node_", false},
		{"trailing dash", "node-", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := LabelValue(tt.id)
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 || v == "" {
				t.Fatalf("LabelValue(%q) = %q: not a valid label value: %v", tt.id, v, errs)
			}
			if (v == tt.id) != tt.same {
				t.Errorf("LabelValue(%q) = %q, want same=%v", tt.id, v, tt.same)
			}
		})
	}
	if LabelValue(strings.Repeat("a", 64)) == LabelValue(strings.Repeat("a", 65)) {
		t.Error("distinct long IDs share a label value")
	}
	if LabelValue("node.") == LabelValue("node_") {
		t.Error("node. and node_ share a label value")
	}
}

// FuzzLeaseName checks that every valid slot key gets a valid, stable Lease
// name and valid label values.
func FuzzLeaseName(f *testing.F) {
	f.Add("prod", "w-1", false)
	f.Add("Prod_EU", "Node.A_", true)
	f.Add(strings.Repeat("C", 256), strings.Repeat("n.", 128), false)
	f.Fuzz(func(t *testing.T, clusterID, nodeID string, coordinator bool) {
		if cluster.ValidateID("clusterId", clusterID) != nil || cluster.ValidateID("nodeId", nodeID) != nil {
			t.Skip()
		}
		k := cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: nodeID}
		if coordinator {
			k.Role = cluster.RoleCoordinator
		}
		n := LeaseName(k)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Fatalf("LeaseName(%v) = %q: %v", k, n, errs)
		}
		for k, v := range leaseLabels(k) {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 || v == "" {
				t.Fatalf("label %s=%q: %v", k, v, errs)
			}
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Fatalf("label key %q: %v", k, errs)
			}
		}
		got, ok := keyFromAnnotations(map[string]string{AnnotationCluster: clusterID, AnnotationRole: string(k.Role), AnnotationNode: nodeID})
		if !ok || got != k {
			t.Fatalf("keyFromAnnotations round trip: got %v, %v; want %v", got, ok, k)
		}
	})
}
