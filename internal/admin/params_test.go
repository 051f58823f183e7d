package admin

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

func TestContinueTokenRoundTrip(t *testing.T) {
	for _, c := range []cursor{
		{cluster.RoleCoordinator, "coord-a"},
		{cluster.RoleWorker, "w.1_x-Y"},
		{cluster.RoleWorker, strings.Repeat("a", cluster.MaxIDBytes)},
	} {
		t.Run(string(c.role)+"/"+c.nodeID[:min(len(c.nodeID), 10)], func(t *testing.T) {
			tok := encodeContinue(c)
			if url.QueryEscape(tok) != tok {
				t.Fatalf("token %q is not URL-safe", tok)
			}
			got, err := decodeContinue(tok)
			if err != nil || got != c {
				t.Fatalf("decode(%q) = %+v, %v; want %+v", tok, got, err, c)
			}
		})
	}
}

func TestContinueTokenRejects(t *testing.T) {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct{ name, tok string }{
		{"not base64", "%%%"},
		{"padded base64", base64.URLEncoding.EncodeToString([]byte("c1\x00worker\x00w1x"))},
		{"std alphabet", "+/+/"},
		{"wrong version", b64("c2\x00worker\x00w1")},
		{"too few parts", b64("c1\x00worker")},
		{"too many parts", b64("c1\x00worker\x00w1\x00x")},
		{"bad role", b64("c1\x00admin\x00w1")},
		{"empty node", b64("c1\x00worker\x00")},
		{"bad node", b64("c1\x00worker\x00w/1")},
		{"too long", strings.Repeat("A", maxContinueBytes+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := decodeContinue(tt.tok); err == nil {
				t.Fatalf("decode(%q) = %+v, want an error", tt.tok, c)
			}
		})
	}
}

// FuzzDecodeContinue: a continue token comes from the client, so the
// decoder must never panic, and whatever it accepts must re-encode to a
// token that decodes to the same cursor.
func FuzzDecodeContinue(f *testing.F) {
	f.Add(encodeContinue(cursor{cluster.RoleWorker, "w1"}))
	f.Add(encodeContinue(cursor{cluster.RoleCoordinator, "c"}))
	f.Add("")
	f.Add("YWJj")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeContinue(s)
		if err != nil {
			return
		}
		again, err := decodeContinue(encodeContinue(c))
		if err != nil || again != c {
			t.Fatalf("re-encoding %+v gives %+v, %v", c, again, err)
		}
		if !c.role.Valid() || cluster.ValidateID("nodeId", c.nodeID) != nil {
			t.Fatalf("accepted an invalid cursor %+v", c)
		}
	})
}

// FuzzParseListParams: the query is untrusted; parsing never panics and
// accepted values are within their documented bounds.
func FuzzParseListParams(f *testing.F) {
	f.Add("role=worker&limit=5&label=a%3Db")
	f.Add("continue=" + encodeContinue(cursor{cluster.RoleWorker, "w1"}))
	f.Add("limit=-1&ready=maybe")
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := parseListParams(raw)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) || pe.param == "" {
				t.Fatalf("error %v does not name a parameter", err)
			}
			return
		}
		if p.limit < 1 || p.limit > apiv1.MaxLimit || len(p.filter.labels) > cluster.MaxLabels {
			t.Fatalf("accepted out-of-range params %+v", p)
		}
	})
}

func TestErrorTable(t *testing.T) {
	tests := []struct {
		err       error
		status    int
		code      string
		retryable bool
	}{
		{badParam("limit", "0", "must be an integer from 1 to 1000"), 400, apiv1.CodeInvalidArgument, false},
		{errUnauthenticated, 401, apiv1.CodeUnauthenticated, false},
		{notFound("node %q", "x"), 404, apiv1.CodeNotFound, false},
		{fmt.Errorf("%w: POST", errMethodNotAllowed), 405, apiv1.CodeMethodNotAllowed, false},
		{errBodyNotAccepted, 413, apiv1.CodeTooLarge, false},
		{fmt.Errorf("%w: %w", coordinator.ErrNotReady, state.ErrUnavailable), 503, apiv1.CodeNotReady, true},
		{fmt.Errorf("etcd: %w", state.ErrTimeout), 503, apiv1.CodeNotReady, true},
		{errors.New("boom at 10.0.0.7:2379"), 500, apiv1.CodeInternal, false},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			status, code, retryable := classify(tt.err)
			if status != tt.status || code != tt.code || retryable != tt.retryable {
				t.Fatalf("classify(%v) = %d %s %v", tt.err, status, code, retryable)
			}
			if codeOfStatus(status) != code {
				t.Fatalf("codeOfStatus(%d) = %s, want %s", status, codeOfStatus(status), code)
			}
		})
	}
	// Error text from dependencies never reaches a client.
	if msg := publicMessage(errors.New("dial 10.0.0.7:2379: refused"), apiv1.CodeInternal); strings.Contains(msg, "10.0.0.7") {
		t.Fatalf("internal error message %q leaks the cause", msg)
	}
	if msg := publicMessage(fmt.Errorf("%w: dial 10.0.0.7:2379", coordinator.ErrNotReady), apiv1.CodeNotReady); strings.Contains(msg, "10.0.0.7") {
		t.Fatalf("not-ready message %q leaks the cause", msg)
	}
}

// TestBadParameters: every malformed parameter is a 400 that names it.
func TestBadParameters(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	long := strings.Repeat("k", 1025)
	tests := []struct {
		path  string
		param string
	}{
		{"/api/v1/nodes?limit=0", "limit"},
		{"/api/v1/nodes?limit=1001", "limit"},
		{"/api/v1/nodes?limit=ten", "limit"},
		{"/api/v1/nodes?limit=", "limit"},
		{"/api/v1/nodes?limit=1&limit=2", "limit"},
		{"/api/v1/nodes?continue=not-a-token", "continue"},
		{"/api/v1/nodes?continue=" + base64.RawURLEncoding.EncodeToString([]byte("c1\x00nobody\x00w1")), "continue"},
		{"/api/v1/nodes?role=admin", "role"},
		{"/api/v1/nodes?role=", "role"},
		{"/api/v1/nodes?health=sick", "health"},
		{"/api/v1/nodes?ready=yes", "ready"},
		{"/api/v1/nodes?label=zone", "label"},
		{"/api/v1/nodes?label=%3Da", "label"},
		{"/api/v1/nodes?label=bad%20key%3Dv", "label"},
		{"/api/v1/nodes?" + strings.Repeat("label=a%3Db&", 17), "label"},
		{"/api/v1/nodes?labelSelector=zone+in+(a", "labelSelector"},
		{"/api/v1/nodes?labelSelector=%3Da", "labelSelector"},
		{"/api/v1/nodes?labelSelector=Zone%2Fx%3D1", "labelSelector"},
		{"/api/v1/nodes?labelSelector=a&labelSelector=b", "labelSelector"},
		{"/api/v1/nodes?labelSelector=" + strings.Repeat("a", 4097), "labelSelector"},
		{"/api/v1/nodes?allowStale=1", "allowStale"},
		{"/api/v1/nodes?roles=worker", "roles"},
		{"/api/v1/nodes?a=%zz", "query"},
		{"/api/v1/nodes?=x", "query"},
		{"/api/v1/cluster?verbose=true", "verbose"},
		{"/api/v1/cluster?allowStale=maybe", "allowStale"},
		{"/api/v1/nodes/w1?limit=5", "limit"},
		{"/api/v1/placement", "key"},
		{"/api/v1/placement?key=", "key"},
		{"/api/v1/placement?key=" + long, "key"},
		{"/api/v1/placement?key=k&replicas=0", "replicas"},
		{"/api/v1/placement?key=k&replicas=17", "replicas"},
		{"/api/v1/placement?key=k&replicas=x", "replicas"},
		{"/api/v1/placement?key=a&key=b", "key"},
	}
	for _, tt := range tests {
		t.Run(tt.path[:min(len(tt.path), 70)], func(t *testing.T) {
			r := e.get(t, tt.path)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", r.status, r.body)
			}
			er := r.apiError(t)
			if er.Code != apiv1.CodeInvalidArgument || er.Parameter != tt.param || er.Retryable ||
				!strings.Contains(er.Message, "parameter "+tt.param) {
				t.Fatalf("error %+v, want one naming %q", er, tt.param)
			}
			if len(er.Message) > 400 {
				t.Fatalf("message of %d bytes echoes the value whole", len(er.Message))
			}
		})
	}
	// The bounds themselves are accepted.
	for _, ok := range []string{"/api/v1/nodes?limit=1", "/api/v1/nodes?limit=1000", "/api/v1/placement?key=k&replicas=16",
		"/api/v1/placement?key=" + long[:1024], "/api/v1/nodes?allowStale=false", "/api/v1/nodes?continue=",
		"/api/v1/nodes?labelSelector=", "/api/v1/nodes?labelSelector=" + strings.Repeat("a", 63),
		"/healthz?probe=1", "/readyz?x", "/api/v1/openapi.json?v=2"} {
		if r := e.get(t, ok); r.status != 200 {
			t.Errorf("%.60s: %d %s", ok, r.status, r.body)
		}
	}
}

// The API's placement limits are the control protocol's: an explanation
// must accept exactly the keys and replica counts a lookup does.
func TestPlacementLimitsMatchProtocol(t *testing.T) {
	if apiv1.MaxPlacementKeyBytes != protocol.MaxKeyBytes || apiv1.MaxPlacementReplicas != protocol.MaxReplicas {
		t.Fatalf("apiv1 limits %d/%d, protocol %d/%d", apiv1.MaxPlacementKeyBytes, apiv1.MaxPlacementReplicas,
			protocol.MaxKeyBytes, protocol.MaxReplicas)
	}
}
