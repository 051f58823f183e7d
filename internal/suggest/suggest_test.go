package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"etcd-endpoint", "etcd-endpoints", 1}, {"lst", "list", 1}} {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"etcd-endpoints", "etcd-prefix", "labels", "listen", "lease-ttl"}
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"etcd-endpoint", []string{"etcd-endpoints"}},
		{"label", []string{"labels"}},
		{"LISTEN", []string{"listen"}},
		{"etcd", []string{"etcd-endpoints", "etcd-prefix"}},
		{"zzzzzz", nil},
	} {
		if got := Closest(tt.name, keys); !slices.Equal(got, tt.want) {
			t.Errorf("Closest(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if h := Hint("etcd-endpoint", keys); h != ` (did you mean "etcd-endpoints"?)` {
		t.Errorf("Hint = %q", h)
	}
}
