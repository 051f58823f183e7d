package otlp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestExportNotRedirectedAcrossOrigins: an OTLP/HTTP receiver that
// redirects the export to another origin (two loopback servers, the
// second on another port) never gets the exporter's headers: net/http
// resends custom headers across every redirect, and Authorization to
// any port of the same host.
func TestExportNotRedirectedAcrossOrigins(t *testing.T) {
	var (
		mu       sync.Mutex
		atFirst  int
		atSecond []http.Header
	)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		atSecond = append(atSecond, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(second.Close)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		atFirst++
		mu.Unlock()
		http.Redirect(w, r, second.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(first.Close)

	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": first.URL,
		"OTEL_EXPORTER_OTLP_HEADERS":  "Authorization=Bearer%20otlp-s3cret,X-Api-Key=otlp-k3y",
		"OTEL_BSP_SCHEDULE_DELAY":     "10",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	p, err := New(context.Background(), func(k string) string { return env[k] }, Process{Role: "coordinator"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracers().Tracer("x").Start(context.Background(), "op")
	span.End()
	_ = p.Shutdown(context.Background()) // the export fails: refused redirect

	mu.Lock()
	defer mu.Unlock()
	if atFirst == 0 {
		t.Fatal("the exporter never reached the first receiver")
	}
	for _, h := range atSecond {
		for _, name := range []string{"Authorization", "X-Api-Key"} {
			if v := h.Get(name); strings.Contains(v, "s3cret") || strings.Contains(v, "k3y") {
				t.Errorf("the other origin got %s: %q", name, v)
			}
		}
	}
}

// TestSameOriginRedirect: redirects within the endpoint's origin are
// followed; any other scheme, host or port is refused.
func TestSameOriginRedirect(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:4318/other", true},
		{"http://h/v1/traces", "http://h:80/x", true},
		{"http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:4319/v1/traces", false},
		{"http://127.0.0.1:4318/v1/traces", "http://localhost:4318/v1/traces", false},
		{"https://h/v1/traces", "http://h/v1/traces", false},
	} {
		from, _ := http.NewRequest(http.MethodPost, tc.from, nil)
		to, _ := http.NewRequest(http.MethodPost, tc.to, nil)
		if err := sameOriginRedirect(to, []*http.Request{from}); (err == nil) != tc.ok {
			t.Errorf("%s -> %s: %v, want allowed %v", tc.from, tc.to, err, tc.ok)
		}
	}
}

// TestDescribeRedactsPassword: the start-up line's exporter description
// never shows the endpoint's password.
func TestDescribeRedactsPassword(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:pa55w0rd@127.0.0.1:1"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	p, err := New(context.Background(), func(k string) string { return env[k] }, Process{Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	if d := p.Describe(); strings.Contains(d, "pa55w0rd") || !strings.Contains(d, "127.0.0.1:1") {
		t.Fatalf("Describe = %q: shows the password, or not the endpoint", d)
	}
}
