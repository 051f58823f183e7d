package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// newerServer serves the real admin handler and adds to every node object
// (and to the answer itself) a field this client's types do not have, as
// a newer server would.
func newerServer(t *testing.T, admin http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, r)
		var obj map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &obj) != nil {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		obj["shardMap"] = map[string]any{"generation": 7}
		addField := func(n any) {
			if m, ok := n.(map[string]any); ok {
				m["nvme"] = map[string]any{"temperatureC": 41}
			}
		}
		if items, ok := obj["items"].([]any); ok {
			for _, it := range items {
				addField(it)
			}
		}
		addField(obj["node"])
		b, _ := json.Marshal(obj)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRawOutputKeepsUnknownFields: -o json, -o yaml and the template
// formats print the API's own objects, so fields a newer server adds are
// neither dropped nor out of reach.
func TestRawOutputKeepsUnknownFields(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := "TALONCTL_SERVER=" + newerServer(t, e.coord.AdminServer.Config.Handler)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"nodes", "list", "-o", "json"}, []string{`"shardMap": {`, `"generation": 7`, `"temperatureC": 41`}},
		{[]string{"nodes", "list", "-o", "yaml"}, []string{"shardMap:\n  generation: 7", "nvme:\n    temperatureC: 41"}},
		{[]string{"nodes", "get", "w-1", "-o", "json"}, []string{`"nodeId": "w-1"`, `"temperatureC": 41`}}, // the node itself, like kubectl
		{[]string{"nodes", "list", "-o", "custom-columns=NODE:.nodeId,TEMP:.nvme.temperatureC", "--role", "worker"}, []string{"NODE   TEMP\nw-1    41\n"}},
		{[]string{"nodes", "list", "-o", "jsonpath={.shardMap.generation}"}, []string{"7"}},
		{[]string{"cluster", "status", "-o", "json"}, []string{`"shardMap": {`}},
		{[]string{"placement", "explain", "k", "-o", "yaml"}, []string{"shardMap:\n  generation: 7"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, env: []string{server}})
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}
