package apiv1

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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

// Job operations and states, as the API spells them.
const (
	JobWarm      = "warm"
	JobFree      = "free"
	JobRunning   = "running"
	JobDone      = "done"
	JobPartial   = "partial"
	JobCancelled = "cancelled"
)

// Job is an operator's cache job: warm (load the blocks of some objects
// onto the workers that own them) or free (evict them from every worker),
// with each worker's progress.
type Job struct {
	ID      string      `json:"id"`
	Op      string      `json:"op"`
	Targets []JobTarget `json:"targets"`
	// By is the principal that started the job; Coordinator the node ID
	// of the coordinator that took the request.
	By          string `json:"by"`
	Coordinator string `json:"coordinator"`
	CreatedAtMs int64  `json:"createdAtUnixMs"`
	// State is running, done, partial (a worker failed or left) or
	// cancelled.
	State       string `json:"state"`
	EndedAtMs   int64  `json:"endedAtUnixMs,omitempty"`
	CancelledBy string `json:"cancelledBy,omitempty"`
	// Totals sum the workers' parts.
	BlocksDone  int64 `json:"blocksDone"`
	BlocksTotal int64 `json:"blocksTotal"`
	BytesDone   int64 `json:"bytesDone"`
	BytesTotal  int64 `json:"bytesTotal"`
	// WorkersDone counts the workers whose part is over, of len(Workers).
	WorkersDone int         `json:"workersDone"`
	Workers     []JobWorker `json:"workers"`
}

// JobTarget is an object, or every object under a prefix.
type JobTarget struct {
	Key    string `json:"key"`
	Prefix bool   `json:"prefix,omitempty"`
}

// JobWorker is one worker's part of a job: pending (not picked up yet),
// running, done, failed (Error says why), left (it left the cluster) or
// cancelled.
type JobWorker struct {
	NodeID      string `json:"nodeId"`
	State       string `json:"state"`
	BlocksDone  int64  `json:"blocksDone"`
	BlocksTotal int64  `json:"blocksTotal"`
	BytesDone   int64  `json:"bytesDone"`
	BytesTotal  int64  `json:"bytesTotal"`
	Error       string `json:"error,omitempty"`
}

// JobList is GET /api/v1/jobs: the cluster's kept jobs, oldest first.
type JobList struct {
	Meta
	Items []Job `json:"items"`
}

// Ended reports whether the job is over.
func (j *Job) Ended() bool { return j.State != JobRunning }

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
