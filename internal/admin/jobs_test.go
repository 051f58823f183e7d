package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
)

// TestJobRoutes: POST /api/v1/jobs waits for cluster feature level 2 (409
// feature_level naming the worker that holds it back), then starts a job
// over the live workers (202, Location); GET lists and reads it; POST
// .../cancel ends it cancelled by the principal; bad parameters are 400
// naming the parameter; a read-only token is 403; an unknown job 404.
// Every answer is checked against the OpenAPI document.
func TestJobRoutes(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = append(scoped(allScopes, "tok-op"), scoped(config.ScopeRead, "tok-ro")...)
	e := startCoordinator(t, envOptions{admin: cfg})
	old := workerRecord("w1", nil)
	old.FeatureLevel = cluster.LevelJobs - 1
	e.put(t, old, time.Minute)
	e.put(t, workerRecord("w2", nil), time.Minute)
	start := apiv1.PathJobs + "?op=warm&object=data/a.bin&prefix=data/set/"
	r := e.do(t, http.MethodPost, start, "tok-op")
	if body := string(r.body); r.status != http.StatusConflict || !strings.Contains(body, `"code":"feature_level"`) || !strings.Contains(body, "worker/w1") {
		t.Fatalf("a job beside a level-%d worker: %d %s; want 409 feature_level naming worker/w1", cluster.LevelJobs-1, r.status, body)
	}
	upgraded := workerRecord("w1", nil)
	upgraded.HeartbeatSeq = 1
	e.put(t, upgraded, time.Minute)
	waitFor(t, "the cluster at level 2", func() bool {
		v := e.coord.LastGood()
		return v != nil && v.Survey.Level >= cluster.LevelJobs
	})
	for _, bad := range []struct{ query, param string }{
		{"?op=load&object=a", "op"},
		{"?op=warm", "object"},
		{"?op=warm&object=a&object=b&object=c&object=d&object=e&object=f&object=g&object=h&prefix=i", "object"},
		{"?op=warm&object=a%0Ab", "object"},
		{"?op=warm&object=a&color=red", "color"},
	} {
		r := e.do(t, http.MethodPost, apiv1.PathJobs+bad.query, "tok-op")
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"parameter":"`+bad.param+`"`) {
			t.Errorf("POST jobs%s: %d %s; want 400 naming %s", bad.query, r.status, r.body, bad.param)
		}
	}
	if r := e.do(t, http.MethodPost, start, "tok-ro"); r.status != http.StatusForbidden {
		t.Fatalf("a job with a read-only token: %d %s; want 403", r.status, r.body)
	}
	r = e.do(t, http.MethodPost, start, "tok-op")
	var j apiv1.Job
	if r.status != http.StatusAccepted || json.Unmarshal(r.body, &j) != nil || j.State != apiv1.JobRunning || len(j.Workers) != 2 ||
		len(j.Targets) != 2 || !j.Targets[1].Prefix || j.By != "name-of-tok-o" {
		t.Fatalf("start: %d %s; want 202, running over w1 and w2, by name-of-tok-o", r.status, r.body)
	}
	var l apiv1.JobList
	if r := e.do(t, http.MethodGet, apiv1.PathJobs, "tok-ro"); r.status != http.StatusOK || json.Unmarshal(r.body, &l) != nil || len(l.Items) != 1 || l.Items[0].ID != j.ID {
		t.Fatalf("list: %d %s; want the job", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, apiv1.JobPath(j.ID), "tok-ro"); r.status != http.StatusOK || !strings.Contains(string(r.body), j.ID) {
		t.Fatalf("get: %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodPost, apiv1.JobPath(j.ID)+apiv1.SuffixCancel, "tok-ro"); r.status != http.StatusForbidden {
		t.Fatalf("cancel with a read-only token: %d %s; want 403", r.status, r.body)
	}
	r = e.do(t, http.MethodPost, apiv1.JobPath(j.ID)+apiv1.SuffixCancel, "tok-op")
	if r.status != http.StatusOK || json.Unmarshal(r.body, &j) != nil || j.State != apiv1.JobCancelled || j.CancelledBy != "name-of-tok-o" || j.EndedAtUnixMs == 0 {
		t.Fatalf("cancel: %d %s; want cancelled by name-of-tok-o", r.status, r.body)
	}
	for _, w := range j.Workers {
		if w.State != "cancelled" {
			t.Errorf("after cancel, %s is %s; want cancelled", w.NodeID, w.State)
		}
	}
	if r := e.do(t, http.MethodGet, apiv1.JobPath("j-none"), "tok-ro"); r.status != http.StatusNotFound {
		t.Fatalf("an unknown job: %d %s; want 404", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, apiv1.JobPath("Bad_ID"), "tok-ro"); r.status != http.StatusBadRequest {
		t.Fatalf("a bad job ID: %d %s; want 400", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, apiv1.JobPath(j.ID)+apiv1.SuffixCancel, "tok-ro"); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET of cancel: %d %s; want 405", r.status, r.body)
	}
	if !strings.Contains(e.logs.String(), "action=job_start") || !strings.Contains(e.logs.String(), "action=job_cancel") {
		t.Error("no audit line for the job's start or cancel")
	}
}
