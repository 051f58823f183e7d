package kuberules

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestNamespaceIsTheAPIServersRule: Namespace accepts exactly what the
// API machinery's IsDNS1123Label accepts (the rule the kube store and the
// API server apply).
func TestNamespaceIsTheAPIServersRule(t *testing.T) {
	for _, ns := range []string{"talon", "a", "0", "talon-bench", "t-1-2", strings.Repeat("a", 63), strings.Repeat("a", 64),
		"", "My_NS", "my_ns", "MyNS", "-talon", "talon-", "ta.lon", "ta lon", "tälon", "talon\n", "1talon", "--", "a-", "-"} {
		err := Namespace(ns)
		api := validation.IsDNS1123Label(ns)
		if (err == nil) != (len(api) == 0) {
			t.Errorf("Namespace(%q) = %v; the API machinery says %q", ns, err, api)
		}
	}
}

func TestNamespacePrefix(t *testing.T) {
	for prefix, ok := range map[string]bool{"talon-bench": true, strings.Repeat("a", 54): true, strings.Repeat("a", 55): false, "My_NS": false, "": false} {
		if err := NamespacePrefix(prefix, 8); (err == nil) != ok {
			t.Errorf("NamespacePrefix(%q, 8) = %v, want ok %v", prefix, err, ok)
		}
	}
}
