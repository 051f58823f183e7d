package kube

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testsupport"
)

func TestOptionsValidation(t *testing.T) {
	base := func() Options {
		return Options{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: "talon"}
	}
	tests := []struct {
		name string
		edit func(*Options)
		want string // substring of the error; "" means valid
	}{
		{"valid", func(*Options) {}, ""},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "kube namespace: must be set"},
		{"namespace not a label", func(o *Options) { o.Namespace = "Talon_NS" }, `kube namespace "Talon_NS": must be a DNS-1123 label`},
		{"negative timeout", func(o *Options) { o.RequestTimeout = -time.Second }, "kube request timeout -1s: must not be negative"},
		{"nan qps", func(o *Options) { o.QPS = float32(math.NaN()) }, "kube qps NaN: must be a finite number"},
		{"negative burst", func(o *Options) { o.Burst = -1 }, "kube burst -1: must not be negative"},
		{"burst below qps", func(o *Options) { o.QPS, o.Burst = 100, 10 }, "kube burst 10: must be at least qps 100"},
		{"negative retries", func(o *Options) { o.ConflictRetries = -2 }, "kube conflict retries -2: must not be negative"},
		{"negative admission wait", func(o *Options) { o.AdmissionWait = -time.Millisecond }, "kube admission wait -1ms: must not be negative"},
		{"no write limit", func(o *Options) { o.MaxInflightWrites = -1 }, ""},
		{"negative page size", func(o *Options) { o.ListPageSize = -5 }, "kube list page size -5: must not be negative"},
		{"missing kubeconfig", func(o *Options) { o.RESTConfig = nil; o.Kubeconfig = filepath.Join(t.TempDir(), "absent") }, "kubeconfig \""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.edit(&o)
			s, err := New(context.Background(), o)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			if err == nil {
				_ = s.Close()
				t.Fatalf("New succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestOptionsInClusterOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := New(context.Background(), Options{Namespace: "talon"})
	if err == nil || !strings.Contains(err.Error(), "set --kubeconfig") {
		t.Fatalf("New without credentials outside a pod: error %v, want one pointing at --kubeconfig", err)
	}
}

func TestOptionsDefaultsAndRESTConfig(t *testing.T) {
	caller := &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "secret-token", QPS: 5, Burst: 10}
	o, err := Options{RESTConfig: caller, Namespace: "talon"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.RequestTimeout != DefaultRequestTimeout || o.QPS != DefaultQPS || o.Burst != DefaultBurst ||
		o.ConflictRetries != DefaultConflictRetries || o.ListPageSize != DefaultListPageSize ||
		o.MaxInflightWrites != DefaultMaxInflightWrites ||
		o.AdmissionWait != DefaultAdmissionWait || o.Clock == nil || o.Logger == nil {
		t.Fatalf("defaults not applied: %+v", o)
	}
	cfg, err := o.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst {
		t.Errorf("rest config QPS/Burst = %v/%d, want %v/%d", cfg.QPS, cfg.Burst, DefaultQPS, DefaultBurst)
	}
	if caller.QPS != 5 || caller.Burst != 10 || caller.Proxy != nil || caller.UserAgent != "" {
		t.Errorf("restConfig modified the caller's rest.Config: %+v", caller)
	}
	if cfg.Proxy == nil {
		t.Error("rest config has no Proxy: client-go would share a cached transport the store cannot close")
	}
	if cfg.Timeout != 0 {
		t.Errorf("rest config Timeout = %s: it would cut watch streams", cfg.Timeout)
	}
	// rest.Config's own formatting redacts the token; the store relies on it.
	if s := cfg.String(); strings.Contains(s, "secret-token") {
		t.Errorf("rest.Config.String leaks the token: %s", s)
	}

	unlimited, err := Options{RESTConfig: caller, Namespace: "talon", QPS: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := unlimited.restConfig(); cfg.QPS >= 0 {
		t.Errorf("QPS -1 gave rest config QPS %v, want negative (no limiter)", cfg.QPS)
	}
}

func TestClosedStore(t *testing.T) {
	s, err := New(context.Background(), Options{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: "talon"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Close(); !errors.Is(err, state.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if err := s.CheckReady(ctx); !errors.Is(err, state.ErrClosed) {
		t.Errorf("CheckReady after Close: %v", err)
	}
	if _, err := s.Snapshot(ctx, "c"); !errors.Is(err, state.ErrClosed) {
		t.Errorf("Snapshot after Close: %v", err)
	}
	if _, err := s.UpsertNode(ctx, record("c", "worker", "n", "i", 1), time.Second); !errors.Is(err, state.ErrClosed) {
		t.Errorf("UpsertNode after Close: %v", err)
	}
	b, ok := <-s.Watch(ctx, "c", state.NewRevision("1"))
	if !ok || !errors.Is(b.Err, state.ErrClosed) {
		t.Errorf("Watch after Close: %+v, %t; want an ErrClosed batch", b, ok)
	}
}

func TestLeaseTTLSeconds(t *testing.T) {
	for _, tt := range []struct {
		ttl  time.Duration
		want int32
	}{
		{time.Nanosecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {2 * time.Second, 2}, {30 * time.Second, 30},
	} {
		got, err := leaseTTLSeconds(tt.ttl)
		if err != nil || got != tt.want {
			t.Errorf("leaseTTLSeconds(%s) = %d, %v; want %d", tt.ttl, got, err, tt.want)
		}
	}
	for _, bad := range []time.Duration{0, -time.Second, time.Duration(math.MaxInt64)} {
		if _, err := leaseTTLSeconds(bad); !errors.Is(err, state.ErrInvalidRecord) {
			t.Errorf("leaseTTLSeconds(%s): error %v, want ErrInvalidRecord", bad, err)
		}
	}
}

func TestOptionsRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := Options{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: "talon", Registerer: reg}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "talon_state_kube_write_refusals_total", "talon_state_kube_writes_inflight"); err != nil || n != 2 {
		t.Fatalf("registered series = %d, %v; want 2", n, err)
	}
	// Every (operation, outcome) of the transitions counter is there from the start.
	if n, err := testutil.GatherAndCount(reg, "talon_state_kube_transitions_total"); err != nil || n != 8 {
		t.Fatalf("transition series = %d, %v; want 8", n, err)
	}
	testsupport.LintMetrics(t, reg, "talon_state_kube_", 9)
	// A second store on the same registry is refused (and starts nothing).
	if s2, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "kube metrics") {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second store on one registry: error %v, want a kube metrics error", err)
	}
	// Close unregisters: the store's successor (a restart in process)
	// registers again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("a store after Close on the same registry: %v", err)
	}
	s3.Close()
}
