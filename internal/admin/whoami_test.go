package admin

import (
	"net/http"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
)

// allowedVerbs lists the verbs a whoami answer allows, comma-separated.
func allowedVerbs(w apiv1.WhoAmI) string {
	var out []string
	for _, v := range w.Verbs {
		if v.Allowed {
			out = append(out, v.Verb)
		}
	}
	return strings.Join(out, ",")
}

// TestWhoAmI: every valid token may ask, whatever its scopes; the answer
// names the principal, its scopes and what each verb needs, and says
// allowed exactly where the route itself would serve the token.
func TestWhoAmI(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: scopedTokens(t)})
	for _, tt := range []struct {
		token, principal, scopes, allowed string
	}{
		{tokOps, "ops", "read,operate", "read,cordon,uncordon,drain,warm,free"},
		{tokMetrics, "prometheus", "metrics", "metrics"},
		{tokReader, "viewer", "read", "read"},
		{tokLegacy, "line-4", "read,metrics", "read,metrics"},
	} {
		t.Run(tt.principal, func(t *testing.T) {
			r := e.do(t, http.MethodGet, apiv1.PathWhoAmI, tt.token)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var w apiv1.WhoAmI
			r.decode(t, &w)
			if w.Principal != tt.principal || strings.Join(w.Scopes, ",") != tt.scopes || !w.Authenticated ||
				w.NodeID != "coord-a" || w.Role != "coordinator" || w.ClusterID != clusterID {
				t.Fatalf("answer %+v", w)
			}
			if got := allowedVerbs(w); got != tt.allowed {
				t.Errorf("allowed verbs %q, want %q", got, tt.allowed)
			}
			// The answer agrees with the routes.
			cordon, _ := w.Access(apiv1.VerbCordon)
			if r := e.do(t, http.MethodPost, apiv1.NodeActionPath("absent", apiv1.SuffixUncordon), tt.token); (r.status != http.StatusForbidden) != cordon.Allowed {
				t.Errorf("uncordon answered %d, whoami says allowed=%v", r.status, cordon.Allowed)
			}
			if !cordon.Allowed && !strings.Contains(cordon.Reason, "needs scope operate; the principal has "+tt.scopes) {
				t.Errorf("cordon reason %q", cordon.Reason)
			}
			read, _ := w.Access(apiv1.VerbRead)
			if r := e.do(t, http.MethodGet, apiv1.PathNodes, tt.token); (r.status == http.StatusOK) != read.Allowed {
				t.Errorf("nodes answered %d, whoami says allowed=%v", r.status, read.Allowed)
			}
			metrics, _ := w.Access(apiv1.VerbMetrics)
			if r := e.do(t, http.MethodGet, apiv1.PathMetrics, tt.token); (r.status == http.StatusOK) != metrics.Allowed {
				t.Errorf("metrics answered %d, whoami says allowed=%v", r.status, metrics.Allowed)
			}
		})
	}
	for _, token := range []string{"", "tok-wrong-0000"} {
		if r := e.do(t, http.MethodGet, apiv1.PathWhoAmI, token); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("whoami with token %q: %d %s, want 401", token, r.status, r.body)
		}
	}
}

// TestWhoAmIWithoutTokens: on a listener without tokens everyone is
// anonymous, may read, and may not write; a group not exposed is named.
func TestWhoAmIWithoutTokens(t *testing.T) {
	cfg := exposeAll()
	cfg.ExposeMetrics = false
	e := startCoordinator(t, envOptions{admin: cfg})
	r := e.get(t, apiv1.PathWhoAmI)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var w apiv1.WhoAmI
	r.decode(t, &w)
	if w.Principal != "(anonymous)" || w.Authenticated || allowedVerbs(w) != "read" {
		t.Fatalf("answer %+v", w)
	}
	if v, _ := w.Access(apiv1.VerbDrain); !strings.Contains(v.Reason, "no tokens") {
		t.Errorf("drain reason %q", v.Reason)
	}
	if v, _ := w.Access(apiv1.VerbMetrics); !strings.Contains(v.Reason, "not exposed") {
		t.Errorf("metrics reason %q", v.Reason)
	}
	if r := e.get(t, apiv1.PathWhoAmI+"?x=1"); r.status != http.StatusBadRequest {
		t.Errorf("unknown parameter: %d", r.status)
	}
}

// TestWhoAmIOnWorker: a worker answers with its own verbs.
func TestWhoAmIOnWorker(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = scoped(allScopes, "tok-worker-1")
	w := startWorker(t, cfg, nil)
	r := w.do(t, http.MethodGet, apiv1.PathWhoAmI, "tok-worker-1")
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var ans apiv1.WhoAmI
	r.decode(t, &ans)
	if ans.Role != "worker" || ans.ClusterID != "" || allowedVerbs(ans) != "read,metrics" {
		t.Fatalf("answer %+v", ans)
	}
}
