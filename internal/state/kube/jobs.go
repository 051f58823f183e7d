package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/state"
)

// Cache jobs (state.JobLog) are Leases named talon-job.<hash>-<job-id>,
// labelled talon.io/role=job and talon.io/job-cluster (not
// talon.io/cluster: the records' selector never matches them, so no
// reader of the records, an older release among them, sees one), with the
// job in the talon.io/job annotation. A job's revision is its Lease's
// resourceVersion, so a replace is refused with a conflict when a peer
// changed it. The store's RBAC already covers Leases.
const (
	// JobRole is the talon.io/role label value of jobs.
	JobRole = "job"
	// LabelJobCluster names a job's cluster.
	LabelJobCluster = "talon.io/job-cluster"
	// AnnotationJob holds a job (state.EncodeJob).
	AnnotationJob = "talon.io/job"
	jobPrefix     = "talon-job."
)

// JobName is the Lease name of a cluster's job id: a '.' keeps it apart
// from every record's LeaseName.
func JobName(clusterID, id string) string {
	sum := sha256.Sum256([]byte("job\x00" + clusterID + "\x00" + id))
	return jobPrefix + hex.EncodeToString(sum[:])[:nameHashHex] + "-" + id
}

func jobSelector(clusterID string) string {
	return LabelManagedBy + "=" + ManagedByValue + "," + LabelRole + "=" + JobRole + "," + LabelJobCluster + "=" + LabelValue(clusterID)
}

// jobLog is the cache jobs (state.JobLog): Leases of role job.
type jobLog struct {
	leases    coordclient.LeaseInterface
	namespace string
	timeout   time.Duration // Options.RequestTimeout
}

// CreateJob implements state.JobLog.
func (g *jobLog) CreateJob(ctx context.Context, clusterID string, j job.Job) error {
	val, err := state.EncodeJob(&j)
	if err != nil {
		return fmt.Errorf("kube create job: %w", err)
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	list, err := g.leases.List(ctx, metav1.ListOptions{LabelSelector: jobSelector(clusterID)})
	if err != nil {
		return mapError("kube create job", err)
	}
	if len(list.Items) >= job.MaxKept {
		return fmt.Errorf("kube create job %q: %w", j.ID, state.ErrTooManyJobs)
	}
	_, err = g.leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: JobName(clusterID, j.ID), Namespace: g.namespace,
		Labels:      map[string]string{LabelManagedBy: ManagedByValue, LabelRole: JobRole, LabelJobCluster: LabelValue(clusterID)},
		Annotations: map[string]string{AnnotationJob: string(val)},
	}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube create job %q: %w", j.ID, state.ErrJobExists)
	}
	if err != nil {
		return mapError("kube create job", err)
	}
	return nil
}

// jobOf decodes a job Lease of clusterID, found false when it is not one
// (a hash collision, a foreign object) or does not decode.
func jobOf(l *coordv1.Lease, clusterID, id string) (job.Job, bool) {
	if l.Labels[LabelJobCluster] != LabelValue(clusterID) {
		return job.Job{}, false
	}
	j, err := job.Decode([]byte(l.Annotations[AnnotationJob]))
	if err != nil || (id != "" && j.ID != id) {
		return job.Job{}, false
	}
	return j, true
}

// Job implements state.JobLog.
func (g *jobLog) Job(ctx context.Context, clusterID, id string) (job.Job, string, bool, error) {
	if err := job.ValidateID(id); err != nil {
		return job.Job{}, "", false, fmt.Errorf("kube read job: %w: %v", state.ErrInvalidRecord, err)
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	l, err := g.leases.Get(ctx, JobName(clusterID, id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return job.Job{}, "", false, nil
	}
	if err != nil {
		return job.Job{}, "", false, mapError("kube read job", err)
	}
	j, ok := jobOf(l, clusterID, id)
	if !ok {
		return job.Job{}, "", false, nil
	}
	return j, l.ResourceVersion, true, nil
}

// ReplaceJob implements state.JobLog: an update at the read
// resourceVersion.
func (g *jobLog) ReplaceJob(ctx context.Context, clusterID string, j job.Job, revision string) (bool, error) {
	val, err := state.EncodeJob(&j)
	if err != nil {
		return false, fmt.Errorf("kube replace job: %w", err)
	}
	if revision == "" {
		return false, fmt.Errorf("kube replace job %q: %w: an empty revision", j.ID, state.ErrInvalidRecord)
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: JobName(clusterID, j.ID), Namespace: g.namespace, ResourceVersion: revision,
		Labels:      map[string]string{LabelManagedBy: ManagedByValue, LabelRole: JobRole, LabelJobCluster: LabelValue(clusterID)},
		Annotations: map[string]string{AnnotationJob: string(val)},
	}}
	_, err = g.leases.Update(ctx, l, metav1.UpdateOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false, nil
	}
	return false, mapError("kube replace job", err)
}

// Jobs implements state.JobLog.
func (g *jobLog) Jobs(ctx context.Context, clusterID string) ([]job.Job, error) {
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	list, err := g.leases.List(ctx, metav1.ListOptions{LabelSelector: jobSelector(clusterID), Limit: 2 * job.MaxKept})
	if err != nil {
		return nil, mapError("kube list jobs", err)
	}
	jobs := make([]job.Job, 0, len(list.Items))
	for i := range list.Items {
		if j, ok := jobOf(&list.Items[i], clusterID, ""); ok {
			jobs = append(jobs, j)
		}
	}
	job.Sort(jobs)
	return jobs, nil
}

// DeleteJob implements state.JobLog.
func (g *jobLog) DeleteJob(ctx context.Context, clusterID, id string) error {
	if err := job.ValidateID(id); err != nil {
		return fmt.Errorf("kube delete job: %w: %v", state.ErrInvalidRecord, err)
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	if err := g.leases.Delete(ctx, JobName(clusterID, id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return mapError("kube delete job", err)
	}
	return nil
}

var (
	_ state.JobLog = (*Store)(nil)
	_ state.JobLog = (*jobLog)(nil)
)
