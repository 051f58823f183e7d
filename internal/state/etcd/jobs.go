package etcd

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/state"
)

// Cache jobs (state.JobLog) are keys <prefix>/jobs/<cluster-id>/<job-id>
// without a lease, outside <prefix>/clusters/ so that no reader of the
// records sees them; a job's revision is its key's mod revision. The
// coordinators delete ended jobs after their retention, so the keyspace
// holds at most job.MaxKept per cluster.
func (k keys) jobs(clusterID string) string { return k.prefix + "/jobs/" + clusterID + "/" }

func (k keys) job(clusterID, id string) string { return k.jobs(clusterID) + id }

// jobLog is the cache jobs (state.JobLog): the keys under <prefix>/jobs/.
type jobLog struct {
	c    *conn
	keys keys
	skip *skipLog
}

// CreateJob implements state.JobLog: a count, then one transaction that
// creates the key when it is new. Two coordinators creating at once may
// pass the count together: the bound is then exceeded by at most the
// number of coordinators, until ended jobs are deleted.
func (g *jobLog) CreateJob(ctx context.Context, clusterID string, j job.Job) error {
	val, err := state.EncodeJob(&j)
	if err != nil {
		return fmt.Errorf("etcd create job: %w", err)
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "create job")
	if err != nil {
		return err
	}
	defer cancel()
	prefix := g.keys.jobs(clusterID)
	resp, err := g.c.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return g.c.mapError("create job", err, ci)
	}
	if resp.Count >= job.MaxKept {
		return fmt.Errorf("etcd create job %q: %w", j.ID, state.ErrTooManyJobs)
	}
	k := g.keys.job(clusterID, j.ID)
	txn, err := g.c.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Commit()
	if err != nil {
		return g.c.mapError("create job", err, ci)
	}
	if !txn.Succeeded {
		return fmt.Errorf("etcd create job %q: %w", j.ID, state.ErrJobExists)
	}
	return nil
}

// Job implements state.JobLog: one linearizable read.
func (g *jobLog) Job(ctx context.Context, clusterID, id string) (job.Job, string, bool, error) {
	if err := job.ValidateID(id); err != nil {
		return job.Job{}, "", false, fmt.Errorf("etcd read job: %w: %v", state.ErrInvalidRecord, err)
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "read job")
	if err != nil {
		return job.Job{}, "", false, err
	}
	defer cancel()
	resp, err := g.c.client.Get(ctx, g.keys.job(clusterID, id))
	if err != nil {
		return job.Job{}, "", false, g.c.mapError("read job", err, ci)
	}
	if len(resp.Kvs) == 0 {
		return job.Job{}, "", false, nil
	}
	j, err := job.Decode(resp.Kvs[0].Value)
	if err != nil {
		g.skip.skipped(string(resp.Kvs[0].Key), err)
		return job.Job{}, "", false, nil
	}
	return j, strconv.FormatInt(resp.Kvs[0].ModRevision, 10), true, nil
}

// ReplaceJob implements state.JobLog: a put guarded by the key's mod
// revision.
func (g *jobLog) ReplaceJob(ctx context.Context, clusterID string, j job.Job, revision string) (bool, error) {
	val, err := state.EncodeJob(&j)
	if err != nil {
		return false, fmt.Errorf("etcd replace job: %w", err)
	}
	rev, err := strconv.ParseInt(revision, 10, 64)
	if err != nil || rev <= 0 {
		return false, fmt.Errorf("etcd replace job %q: %w: revision %q is not one of this store's", j.ID, state.ErrInvalidRecord, revision)
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "replace job")
	if err != nil {
		return false, err
	}
	defer cancel()
	k := g.keys.job(clusterID, j.ID)
	resp, err := g.c.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).
		Then(clientv3.OpPut(k, string(val))).
		Commit()
	if err != nil {
		return false, g.c.mapError("replace job", err, ci)
	}
	return resp.Succeeded, nil
}

// Jobs implements state.JobLog: one range read.
func (g *jobLog) Jobs(ctx context.Context, clusterID string) ([]job.Job, error) {
	ctx, cancel, ci, err := g.c.begin(ctx, "list jobs")
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := g.c.client.Get(ctx, g.keys.jobs(clusterID), clientv3.WithPrefix(), clientv3.WithLimit(2*job.MaxKept))
	if err != nil {
		return nil, g.c.mapError("list jobs", err, ci)
	}
	vals := make([][]byte, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		vals = append(vals, kv.Value)
	}
	return job.DecodeAll(vals), nil
}

// DeleteJob implements state.JobLog.
func (g *jobLog) DeleteJob(ctx context.Context, clusterID, id string) error {
	if err := job.ValidateID(id); err != nil {
		return fmt.Errorf("etcd delete job: %w: %v", state.ErrInvalidRecord, err)
	}
	ctx, cancel, ci, err := g.c.begin(ctx, "delete job")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := g.c.client.Delete(ctx, g.keys.job(clusterID, id)); err != nil {
		return g.c.mapError("delete job", err, ci)
	}
	return nil
}

var (
	_ state.JobLog = (*Store)(nil)
	_ state.JobLog = (*jobLog)(nil)
)
