package admin

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
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

// TestOpenAPIEndpoint: both roles serve the checked-in document as is.
func TestOpenAPIEndpoint(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	r := e.get(t, apiv1.PathOpenAPI)
	if r.status != http.StatusOK || !bytes.Equal(r.body, apiv1.OpenAPI()) || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("coordinator: %d, %d bytes, content type %q", r.status, len(r.body), r.header.Get("Content-Type"))
	}
	c, err := apiv1.NewClient([]string{e.url}, apiv1.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.OpenAPIDocument(context.Background())
	if err != nil || !bytes.Equal(doc, apiv1.OpenAPI()) {
		t.Fatalf("client: %d bytes, %v", len(doc), err)
	}
	w := startWorker(t, exposeAll(), nil)
	if r := w.get(t, apiv1.PathOpenAPI); r.status != http.StatusOK || !bytes.Equal(r.body, apiv1.OpenAPI()) {
		t.Fatalf("worker: %d", r.status)
	}
}
