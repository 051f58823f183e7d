package apiv1

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/talonhq/talon/internal/job"
)

// Paths and parameters of the operator's cache jobs (warm, free).
const (
	// PathJobs lists the cluster's jobs (GET) and starts one (POST
	// ?op=warm|free&object=K…&prefix=P…, scope operate).
	PathJobs = "/api/v1/jobs"
	// SuffixCancel cancels a job: POST /api/v1/jobs/{id}/cancel.
	SuffixCancel = "/cancel"

	ParamOp     = "op"
	ParamObject = "object"
	ParamPrefix = "prefix"
)

// Job operations and states, as the API spells them (package job's).
const (
	JobWarm      = job.Warm
	JobFree      = job.Free
	JobRunning   = job.Running
	JobDone      = job.Done
	JobPartial   = job.Partial
	JobCancelled = job.Cancelled
)

// Job is an operator's cache job as the API shows it: the job as the
// store keeps it (package job: warm or free, its targets, state, and each
// worker's part) and the sums of its workers' parts.
type Job struct {
	job.Job
	BlocksDone  int64 `json:"blocksDone"`
	BlocksTotal int64 `json:"blocksTotal"`
	BytesDone   int64 `json:"bytesDone"`
	BytesTotal  int64 `json:"bytesTotal"`
	// WorkersDone counts the workers whose part is over, of len(Workers).
	WorkersDone int `json:"workersDone"`
}

// NewJob is j with its sums.
func NewJob(j job.Job) Job {
	out := Job{Job: j}
	if out.Workers == nil {
		out.Workers = []job.Part{}
	}
	for _, w := range j.Workers {
		out.BlocksDone += w.BlocksDone
		out.BlocksTotal += w.BlocksTotal
		out.BytesDone += w.BytesDone
		out.BytesTotal += w.BytesTotal
		if job.PartEnded(w.State) {
			out.WorkersDone++
		}
	}
	return out
}

// JobList is GET /api/v1/jobs: the cluster's kept jobs, oldest first.
type JobList struct {
	Meta
	Items []Job `json:"items"`
}

// JobPath is the path of job id.
func JobPath(id string) string { return PathJobs + "/" + url.PathEscape(id) }

// StartJob asks the coordinators to start a cache job: op is JobWarm or
// JobFree; objects are keys and prefixes key prefixes.
func (c *Client) StartJob(ctx context.Context, op string, objects, prefixes []string) (*Job, error) {
	q := url.Values{ParamOp: {op}}
	for _, o := range objects {
		q.Add(ParamObject, o)
	}
	for _, p := range prefixes {
		q.Add(ParamPrefix, p)
	}
	var out Job
	// No failover on 503: a retry elsewhere could start the job twice.
	return &out, c.jobCall(ctx, http.MethodPost, PathJobs, q, false, http.StatusAccepted, &out)
}

// CancelJob asks the coordinators to cancel job id.
func (c *Client) CancelJob(ctx context.Context, id string) (*Job, error) {
	var out Job
	return &out, c.jobCall(ctx, http.MethodPost, JobPath(id)+SuffixCancel, nil, true, http.StatusOK, &out)
}

// Job returns job id.
func (c *Client) Job(ctx context.Context, id string) (*Job, error) {
	var out Job
	return &out, c.jobCall(ctx, http.MethodGet, JobPath(id), nil, true, http.StatusOK, &out)
}

// Jobs returns the cluster's kept jobs.
func (c *Client) Jobs(ctx context.Context) (*JobList, error) {
	var out JobList
	return &out, c.jobCall(ctx, http.MethodGet, PathJobs, nil, true, http.StatusOK, &out)
}

func (c *Client) jobCall(ctx context.Context, method, path string, q url.Values, failover503 bool, want int, out any) error {
	return c.doMethod(ctx, method, path, q, failover503, func(resp *http.Response, base string) error {
		body, err := readBody(resp)
		if err != nil {
			return fmt.Errorf("admin api %s: reading %s: %w", base, path, err)
		}
		if resp.StatusCode != want {
			return c.apiError(resp, body, base)
		}
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("admin api %s: decoding %s: %w", base, path, err)
		}
		return nil
	})
}
