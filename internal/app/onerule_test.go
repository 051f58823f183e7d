package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state/kube"
)

// TestEtcdSettingsOneRule: every edge value of etcd-prefix and
// etcd-endpoints gets the same answer from the configuration's
// validation (talon config validate) and from the etcd store's (start-up,
// etcd.New). Issue 39: "/talon/" passed the first and failed the second;
// a unix:// endpoint the other way round.
func TestEtcdSettingsOneRule(t *testing.T) {
	long := "/" + strings.Repeat("a", 255)
	prefixes := []string{"/talon", "/talon/", "/", "talon", "", "//talon", "/a//b", "/a/b", long, long + "a"}
	endpoints := []string{"127.0.0.1:2379", "etcd:2379", "[::1]:2379", "etcd", "", "http://etcd:2379", "https://etcd:2379",
		"https://user:secret@etcd:2379", "unix:///run/etcd.sock", "unixs:///run/etcd.sock", "unix://", "ftp://etcd:2379", "http://", "http:///path"}
	check := func(field, value string, set func(*config.Config)) {
		t.Helper()
		loaded, err := config.LoadUnvalidated(cluster.RoleCoordinator, config.Options{Environ: []string{"TALON_STATE_BACKEND=etcd", "TALON_INSECURE_CONTROL_PLANE=true"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := loaded.Config
		set(cfg)
		configErr := cfg.Validate()
		startErr := etcdOptions(cfg, slog.New(slog.DiscardHandler), nil).Validate()
		if (configErr == nil) != (startErr == nil) {
			t.Errorf("%s %q: config validate says %v, start-up says %v", field, value, configErr, startErr)
		}
		if strings.Contains(value, "secret") && (configErr == nil || strings.Contains(configErr.Error(), "secret") || strings.Contains(startErr.Error(), "secret")) {
			t.Errorf("%s %q: the password is refused and never shown: %v / %v", field, value, configErr, startErr)
		}
	}
	for _, p := range prefixes {
		check("etcd-prefix", p, func(c *config.Config) { c.Etcd.Prefix = p })
	}
	for _, e := range endpoints {
		check("etcd-endpoints", e, func(c *config.Config) { c.Etcd.Endpoints = []string{e} })
	}
}

// TestKubeNamespaceOneRule: every edge value of kube-namespace gets the
// same answer from the configuration's validation (talon config
// validate) and from the Kubernetes store's (start-up, kube.New, which
// checks its options before it reads the kubeconfig). "My_NS" passed the
// first and failed the second.
func TestKubeNamespaceOneRule(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "missing-kubeconfig")
	for _, ns := range []string{"talon", "My_NS", "my_ns", "MyNS", "-talon", "talon-", "ta.lon", "1talon", "a", "", strings.Repeat("a", 63), strings.Repeat("a", 64)} {
		loaded, err := config.LoadUnvalidated(cluster.RoleCoordinator, config.Options{Environ: []string{"TALON_STATE_BACKEND=kubernetes", "TALON_INSECURE_CONTROL_PLANE=true"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := loaded.Config
		cfg.Kube.Namespace, cfg.Kube.Kubeconfig = ns, kubeconfig
		configErr := cfg.Validate()
		_, startErr := kube.New(context.Background(), kubeOptions(cfg, slog.New(slog.DiscardHandler), nil))
		if startErr == nil {
			t.Fatalf("kube.New with a missing kubeconfig succeeded")
		}
		nsRefused := strings.HasPrefix(startErr.Error(), "kube namespace")
		if (configErr == nil) == nsRefused {
			t.Errorf("kube-namespace %q: config validate says %v, start-up says %v", ns, configErr, startErr)
		}
	}
}
