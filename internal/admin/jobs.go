package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/job"
)

// Jobs is what the admin listener asks of a coordinator's cache jobs
// (*coordinator.JobBoard implements it).
type Jobs interface {
	Start(ctx context.Context, req coordinator.JobRequest) (job.Job, error)
	Cancel(ctx context.Context, id, by string) (job.Job, error)
	List(ctx context.Context) ([]job.Job, error)
	Get(ctx context.Context, id string) (job.Job, error)
}

// The cache jobs' routes, on coordinators: GET lists and reads (scope
// read); POST starts and cancels (scope operate, audited, never
// cross-site, like every write).
var (
	routeJobs = &route{name: "jobs", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: onCluster((*clusterAPI).jobs),
		methods: []string{http.MethodGet, http.MethodHead, http.MethodPost}, actions: map[string]string{http.MethodPost: "job_start"}}
	routeJob = &route{name: "job", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: onCluster((*clusterAPI).job),
		methods: []string{http.MethodGet, http.MethodHead, http.MethodPost}, actions: map[string]string{http.MethodPost: "job_cancel"}}
)

// jobs answers GET /api/v1/jobs (the kept jobs) and POST
// /api/v1/jobs?op=warm|free&object=…&prefix=… (start one: 202).
func (a *clusterAPI) jobs(w http.ResponseWriter, r *http.Request, _ bool) error {
	if a.board == nil {
		return notFound("this coordinator runs no cache jobs")
	}
	if r.Method != http.MethodPost {
		if _, err := parseQuery(r.URL.RawQuery, nil, nil); err != nil {
			return err
		}
		jobs, err := a.board.List(r.Context())
		if err != nil {
			return err
		}
		out := apiv1.JobList{Meta: apiv1.Meta{SchemaVersion: apiv1.SchemaVersion, GeneratedAtUnixMs: a.now().UnixMilli()}, Items: make([]apiv1.Job, 0, len(jobs))}
		if v := a.coord.LastGood(); v != nil {
			out.Meta = a.meta(v, false)
		}
		for _, j := range jobs {
			out.Items = append(out.Items, apiJob(j))
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	req, err := parseJobRequest(r.URL.RawQuery)
	if err != nil {
		return err
	}
	aud := auditOf(r.Context())
	req.By = aud.principal
	aud.attrs = append(aud.attrs, "op", req.Op, "targets", len(req.Targets))
	j, err := a.board.Start(r.Context(), req)
	if err != nil {
		aud.attrs = append(aud.attrs, "error", err)
		return fmt.Errorf("%s: %w", req.Op, err)
	}
	aud.attrs = append(aud.attrs, "job", j.ID, "workers", len(j.Workers))
	w.Header().Set("Location", apiv1.JobPath(j.ID))
	writeJSON(w, http.StatusAccepted, apiJob(j))
	return nil
}

// job answers GET /api/v1/jobs/{id} and POST /api/v1/jobs/{id}/cancel.
func (a *clusterAPI) job(w http.ResponseWriter, r *http.Request, _ bool) error {
	if a.board == nil {
		return notFound("this coordinator runs no cache jobs")
	}
	rest := strings.TrimPrefix(r.URL.Path, apiv1.PathJobs+"/")
	id, cancel := strings.CutSuffix(rest, apiv1.SuffixCancel)
	if err := job.ValidateID(id); err != nil {
		return badParam("id", id, "must be a job ID (talonctl jobs list): %v", err)
	}
	if _, err := parseQuery(r.URL.RawQuery, nil, nil); err != nil {
		return err
	}
	var j job.Job
	var err error
	switch {
	case r.Method == http.MethodPost && cancel:
		aud := auditOf(r.Context())
		aud.attrs = append(aud.attrs, "job", id)
		j, err = a.board.Cancel(r.Context(), id, aud.principal)
	case r.Method == http.MethodPost:
		return fmt.Errorf("%w: POST %s; only POST %s/{id}%s is served", errMethodNotAllowed, quoteShort(r.URL.Path), apiv1.PathJobs, apiv1.SuffixCancel)
	case cancel:
		return fmt.Errorf("%w: %s %s; only POST is served", errMethodNotAllowed, r.Method, quoteShort(r.URL.Path))
	default:
		j, err = a.board.Get(r.Context(), id)
	}
	if errors.Is(err, coordinator.ErrJobNotFound) {
		return notFound("%v", err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiJob(j))
	return nil
}

// parseJobRequest reads op, object and prefix, each checked against the
// job log's rules.
func parseJobRequest(raw string) (coordinator.JobRequest, error) {
	q, err := parseQuery(raw, []string{apiv1.ParamOp}, []string{apiv1.ParamObject, apiv1.ParamPrefix})
	if err != nil {
		return coordinator.JobRequest{}, err
	}
	op, _ := q.get(apiv1.ParamOp)
	if op != job.Warm && op != job.Free {
		return coordinator.JobRequest{}, badParam(apiv1.ParamOp, op, "must be %s or %s", job.Warm, job.Free)
	}
	req := coordinator.JobRequest{Op: op}
	for _, p := range []struct {
		name   string
		prefix bool
	}{{apiv1.ParamObject, false}, {apiv1.ParamPrefix, true}} {
		for _, k := range q.v[p.name] {
			if err := job.ValidateKey(k); err != nil {
				return coordinator.JobRequest{}, badParam(p.name, k, "%v", err)
			}
			req.Targets = append(req.Targets, job.Target{Key: k, Prefix: p.prefix})
		}
	}
	if n := len(req.Targets); n == 0 || n > job.MaxTargets {
		return coordinator.JobRequest{}, badParam(apiv1.ParamObject, fmt.Sprint(n), "a job takes 1 to %d objects and prefixes together; %d given", job.MaxTargets, n)
	}
	return req, nil
}

// apiJob is j as the API shows it, with its sums.
func apiJob(j job.Job) apiv1.Job { return apiv1.NewJob(j) }
