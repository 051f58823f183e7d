package admin

import (
	"net/http"
	"testing"
)

// TestOpenAPICheckDetectsDrift proves the response check used by every
// test can fail: undocumented fields, missing fields, wrong types and
// undocumented statuses are all mismatches.
func TestOpenAPICheckDetectsDrift(t *testing.T) {
	meta := `"schemaVersion":1,"generatedAtUnixMs":1,"revision":"r","observedAtUnixMs":1,"stale":false`
	tests := []struct {
		name   string
		path   string
		status int
		body   string
		ok     bool
	}{
		{"valid empty list", "/api/v1/nodes", 200, `{` + meta + `,"items":[],"continue":""}`, true},
		{"undocumented field", "/api/v1/nodes", 200, `{` + meta + `,"items":[],"continue":"","extra":1}`, false},
		{"missing field", "/api/v1/nodes", 200, `{` + meta + `,"items":[]}`, false},
		{"wrong type", "/api/v1/nodes", 200, `{` + meta + `,"items":{},"continue":""}`, false},
		{"undocumented status", "/api/v1/nodes", 418, `{"error":{"code":"x","message":"m","retryable":false}}`, false},
		{"bad version format", "/api/v1/placement?key=k", 200, `{` + meta + `,"key":"k","replicas":1,"placementVersion":"12","outcome":"ok","owners":[],"candidates":[],"excluded":[]}`, false},
		{"valid error", "/api/v1/cluster", 503, `{"error":{"code":"not_ready","message":"m","retryable":true}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://admin.test"+tt.path, nil)
			h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
			err := openAPIMismatch(req, &response{status: tt.status, header: h, body: []byte(tt.body)})
			if (err == nil) != tt.ok {
				t.Fatalf("mismatch = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
