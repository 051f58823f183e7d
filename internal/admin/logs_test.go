package admin

import (
	"net/http"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/state"
)

// TestFailClosedDoesNotFloodTheLog: while the coordinator fails closed,
// every probe and API read answered 503 is expected, not news: none of
// them logs at warning level (an outage used to log one line per request,
// 1,507 lines from three coordinators in a minute).
func TestFailClosedDoesNotFloodTheLog(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll(), faultFromStart: state.ErrUnavailable})
	const n = 30
	for range n {
		for _, p := range []string{apiv1.PathReadyz, apiv1.PathNodes} {
			if r := e.get(t, p); r.status != http.StatusServiceUnavailable {
				t.Fatalf("%s: %d %s, want 503", p, r.status, r.body)
			}
		}
	}
	warns := 0
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "admin request") {
			warns++
		}
	}
	if warns != 0 {
		t.Fatalf("%d warning lines for %d answers of 503", warns, 2*n)
	}
}

// TestRefusalsLoggedOncePerClient: 1,000 requests without a token (401)
// log one line for the client, not 1,000 (the old listener logged each at
// info).
func TestRefusalsLoggedOncePerClient(t *testing.T) {
	adminCfg := exposeAll()
	adminCfg.Tokens = scoped(allScopes, "s3cret-token-value")
	e := startCoordinator(t, envOptions{admin: adminCfg})
	const n = 1000
	for range n {
		if r := e.get(t, apiv1.PathNodes); r.status != http.StatusUnauthorized {
			t.Fatalf("without a token: %d, want 401", r.status)
		}
	}
	lines := strings.Count(e.logs.String(), "admin request refused")
	if lines != 1 {
		t.Fatalf("%d log lines for %d refused requests of one client, want 1", lines, n)
	}
}
