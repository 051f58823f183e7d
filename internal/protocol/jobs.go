package protocol

import (
	"fmt"

	"github.com/talonhq/talon/internal/cluster"
)

// Jobs asks for the operator's cache jobs (warm, free) that the sending
// worker has a part in, and reports its progress on the jobs it runs. A
// worker sends it after each accepted heartbeat, as it sends
// Instructions; the coordinator folds the reports into the cluster's job
// log and answers with JobOrders, or with an Error (not_ready while it
// has not read the log yet). Only the worker the connection's credential
// names may ask. A coordinator of feature level 1 or lower does not know
// the type and answers invalid_argument; no job is created before every
// live process speaks level 2 (cluster.LevelJobs).
type Jobs struct {
	ClusterID     string      // cluster.ValidateID rules
	NodeID        string      // cluster.ValidateID rules
	IncarnationID string      // not empty
	Reports       []JobReport // at most MaxJobReports
}

// JobReport is a worker's progress on one job.
type JobReport struct {
	JobID       string // 1 to MaxJobIDBytes
	State       JobState
	BlocksDone  uint64
	BlocksTotal uint64
	BytesDone   uint64
	BytesTotal  uint64
	Error       string // at most MaxJobErrorBytes; empty unless State is JobFailed
}

// JobState is a worker's state in a job.
type JobState uint8

// Job states of a report.
const (
	JobRunning   JobState = 1
	JobDone      JobState = 2
	JobFailed    JobState = 3
	JobCancelled JobState = 4
)

// JobOp is what a job does.
type JobOp uint8

// Job operations.
const (
	JobWarm JobOp = 1 // load the blocks the worker owns
	JobFree JobOp = 2 // evict the blocks the worker holds
)

// JobOrders answers Jobs: every job the worker has an unfinished part in
// (at most MaxJobOrders, oldest first). A job the worker runs that is not
// listed ended or was cancelled: the worker stops it.
type JobOrders struct {
	Orders []JobOrder
}

// JobOrder is one job to run.
type JobOrder struct {
	JobID   string // 1 to MaxJobIDBytes
	Op      JobOp
	Targets []JobTarget // 1 to MaxJobTargets
}

// JobTarget is an object key, or a prefix of keys.
type JobTarget struct {
	Prefix bool
	Key    string // 1 to MaxKeyBytes
}

// Job message limits.
const (
	MaxJobIDBytes    = 64
	MaxJobErrorBytes = 256
	MaxJobReports    = 8
	MaxJobOrders     = 6
	MaxJobTargets    = 8
)

func (*Jobs) Type() Type      { return TypeJobs }
func (*JobOrders) Type() Type { return TypeJobOrders }

func (m *Jobs) validate() error {
	if err := cluster.ValidateID("clusterId", m.ClusterID); err != nil {
		return &FieldError{Type: TypeJobs, Field: "clusterId", Kind: kindOf(len(m.ClusterID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	if err := cluster.ValidateID("nodeId", m.NodeID); err != nil {
		return &FieldError{Type: TypeJobs, Field: "nodeId", Kind: kindOf(len(m.NodeID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	if err := checkStr(TypeJobs, "incarnationId", m.IncarnationID, cluster.MaxIDBytes, true); err != nil {
		return err
	}
	if len(m.Reports) > MaxJobReports {
		return fieldErr(TypeJobs, "reports", ErrFieldTooLarge, "%d reports; at most %d", len(m.Reports), MaxJobReports)
	}
	for _, rep := range m.Reports {
		if err := checkStr(TypeJobs, "jobId", rep.JobID, MaxJobIDBytes, true); err != nil {
			return err
		}
		if rep.State < JobRunning || rep.State > JobCancelled {
			return fieldErr(TypeJobs, "state", ErrInvalidValue, "%d: must be 1 running, 2 done, 3 failed or 4 cancelled", rep.State)
		}
		if err := checkStr(TypeJobs, "error", rep.Error, MaxJobErrorBytes, false); err != nil {
			return err
		}
		if rep.BlocksDone > rep.BlocksTotal || rep.BytesDone > rep.BytesTotal {
			return fieldErr(TypeJobs, "blocksDone", ErrInvalidValue, "%d of %d blocks, %d of %d bytes: done must not exceed total", rep.BlocksDone, rep.BlocksTotal, rep.BytesDone, rep.BytesTotal)
		}
	}
	return nil
}

func (m *Jobs) AppendBinary(b []byte) ([]byte, error) {
	if err := m.validate(); err != nil {
		return b, err
	}
	b = appendStr(b, m.ClusterID)
	b = appendStr(b, m.NodeID)
	b = appendStr(b, m.IncarnationID)
	b = appendU16(b, uint16(len(m.Reports)))
	for _, rep := range m.Reports {
		b = appendStr(b, rep.JobID)
		b = append(b, byte(rep.State))
		b = appendU64(b, rep.BlocksDone)
		b = appendU64(b, rep.BlocksTotal)
		b = appendU64(b, rep.BytesDone)
		b = appendU64(b, rep.BytesTotal)
		b = appendStr(b, rep.Error)
	}
	return b, nil
}

func (m *Jobs) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeJobs, b: p}
	var a Jobs
	a.ClusterID = r.str("clusterId", cluster.MaxIDBytes, true)
	a.NodeID = r.str("nodeId", cluster.MaxIDBytes, true)
	a.IncarnationID = r.str("incarnationId", cluster.MaxIDBytes, true)
	n := int(r.u16("reports"))
	if n > MaxJobReports && r.err == nil {
		return fieldErr(TypeJobs, "reports", ErrFieldTooLarge, "%d reports; at most %d", n, MaxJobReports)
	}
	for i := 0; i < n && r.err == nil; i++ {
		var rep JobReport
		rep.JobID = r.str("jobId", MaxJobIDBytes, true)
		rep.State = JobState(r.u8("state"))
		rep.BlocksDone = r.u64("blocksDone")
		rep.BlocksTotal = r.u64("blocksTotal")
		rep.BytesDone = r.u64("bytesDone")
		rep.BytesTotal = r.u64("bytesTotal")
		rep.Error = r.str("error", MaxJobErrorBytes, false)
		a.Reports = append(a.Reports, rep)
	}
	if err := r.finish(); err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return err
	}
	*m = a
	return nil
}

func (m *JobOrders) validate() error {
	if len(m.Orders) > MaxJobOrders {
		return fieldErr(TypeJobOrders, "orders", ErrFieldTooLarge, "%d orders; at most %d", len(m.Orders), MaxJobOrders)
	}
	for _, o := range m.Orders {
		if err := checkStr(TypeJobOrders, "jobId", o.JobID, MaxJobIDBytes, true); err != nil {
			return err
		}
		if o.Op != JobWarm && o.Op != JobFree {
			return fieldErr(TypeJobOrders, "op", ErrInvalidValue, "%d: must be 1 warm or 2 free", o.Op)
		}
		if len(o.Targets) == 0 || len(o.Targets) > MaxJobTargets {
			return fieldErr(TypeJobOrders, "targets", kindOf(len(o.Targets), MaxJobTargets), "%d targets; must be 1 to %d", len(o.Targets), MaxJobTargets)
		}
		for _, t := range o.Targets {
			if err := checkStr(TypeJobOrders, "key", t.Key, MaxKeyBytes, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *JobOrders) AppendBinary(b []byte) ([]byte, error) {
	if err := m.validate(); err != nil {
		return b, err
	}
	b = appendU16(b, uint16(len(m.Orders)))
	for _, o := range m.Orders {
		b = appendStr(b, o.JobID)
		b = append(b, byte(o.Op))
		b = appendU16(b, uint16(len(o.Targets)))
		for _, t := range o.Targets {
			b = appendBool(b, t.Prefix)
			b = appendStr(b, t.Key)
		}
	}
	return b, nil
}

func (m *JobOrders) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeJobOrders, b: p}
	var a JobOrders
	n := int(r.u16("orders"))
	if n > MaxJobOrders && r.err == nil {
		return fieldErr(TypeJobOrders, "orders", ErrFieldTooLarge, "%d orders; at most %d", n, MaxJobOrders)
	}
	for i := 0; i < n && r.err == nil; i++ {
		var o JobOrder
		o.JobID = r.str("jobId", MaxJobIDBytes, true)
		o.Op = JobOp(r.u8("op"))
		k := int(r.u16("targets"))
		if k > MaxJobTargets && r.err == nil {
			return fieldErr(TypeJobOrders, "targets", ErrFieldTooLarge, "%d targets; at most %d", k, MaxJobTargets)
		}
		for j := 0; j < k && r.err == nil; j++ {
			var t JobTarget
			t.Prefix = r.boolean("prefix")
			t.Key = r.str("key", MaxKeyBytes, true)
			o.Targets = append(o.Targets, t)
		}
		a.Orders = append(a.Orders, o)
	}
	if err := r.finish(); err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return err
	}
	*m = a
	return nil
}

// String returns the operation's name.
func (o JobOp) String() string {
	switch o {
	case JobWarm:
		return "warm"
	case JobFree:
		return "free"
	}
	return fmt.Sprintf("op_%d", uint8(o))
}

// String returns the state's name.
func (s JobState) String() string {
	switch s {
	case JobRunning:
		return "running"
	case JobDone:
		return "done"
	case JobFailed:
		return "failed"
	case JobCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("state_%d", uint8(s))
}
