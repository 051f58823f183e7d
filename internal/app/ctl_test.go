package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProbe: talon probe exits 0 only when every URL answers 200, 1 naming
// the one that does not, 2 on a bad flag.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, `{"status":"not_ready"}`, http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if code, out, errOut := run(t, nil, "probe", srv.URL+"/healthz", srv.URL+"/"); code != ExitOK || !strings.Contains(out, "/healthz: 200 OK") {
		t.Errorf("probe of two 200s: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := run(t, nil, "probe", srv.URL+"/healthz", srv.URL+"/readyz")
	if code != ExitError || !strings.Contains(out+errOut, "/readyz answered 503") {
		t.Errorf("probe of a 503: exit %d, want %d naming /readyz\n%s%s", code, ExitError, out, errOut)
	}
	if code, _, _ := run(t, nil, "probe", "--timeout", "0s", srv.URL); code != ExitUsage {
		t.Errorf("probe --timeout 0s: exit %d, want %d", code, ExitUsage)
	}
	if code, _, errOut := run(t, nil, "probe", "--ca-file", "/nonexistent", srv.URL); code != ExitUsage || !strings.Contains(errOut, "--ca-file") {
		t.Errorf("probe --ca-file /nonexistent: exit %d, want %d naming --ca-file: %s", code, ExitUsage, errOut)
	}
}

// TestCtl: talon ctl passes its arguments to talonctl and ends with
// talonctl's exit code (3: the admin API is unavailable).
func TestCtl(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"not_ready","message":"store unreachable"}}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if code, _, _ := run(t, nil, "ctl", "--server", srv.URL, "--timeout", "2s", "cluster", "status"); code != 3 {
		t.Errorf("talon ctl cluster status against an unready server: exit %d, want talonctl's 3", code)
	}
	if code, _, _ := run(t, nil, "ctl", "--no-such-flag"); code != ExitUsage {
		t.Errorf("talon ctl --no-such-flag: exit %d, want %d", code, ExitUsage)
	}
}
