package app

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
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
