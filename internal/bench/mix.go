package bench

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Mix names what the heartbeats of a raw phase cost the store.
type Mix string

const (
	// MixRenew is what a heartbeat costs Talon's store since issue 36: a
	// heartbeat that changes nothing renews the record's lease (etcd: one
	// lease keepalive; Kubernetes: a small merge patch of renewTime and
	// the renewal's sequence), and every statusEvery-th heartbeat of a
	// writer writes the record (etcd: a compare-and-swap put; Kubernetes: a
	// merge patch of the status annotation). At the default status
	// interval (1m over a 5s heartbeat interval) that is 11 renewals to 1
	// write.
	MixRenew Mix = "renew"
	// MixWrite writes the record on every heartbeat, as the raw ceiling
	// did before renewals (etcd: a compare-and-swap put; Kubernetes: an
	// UPDATE of the whole Lease), whatever statusEvery says.
	MixWrite Mix = "write"
)

// Mixes are the mixes a raw phase can run, in the order the reports list
// them.
var Mixes = []Mix{MixRenew, MixWrite}

// ParseMix returns the mix named s.
func ParseMix(s string) (Mix, error) {
	for _, m := range Mixes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("mix %q: must be %s or %s", s, MixRenew, MixWrite)
}

// writesStatus reports whether a writer's heartbeat seq, whose record was
// last written in full at statusSeq, writes the record rather than only
// renewing its lease: cluster.NeedsStatusWrite's rule for a record whose
// status did not change (statusEvery 0: every heartbeat writes).
func writesStatus(seq, statusSeq, statusEvery uint64) bool {
	return statusEvery == 0 || seq < statusSeq || seq-statusSeq >= statusEvery
}

// heartbeatOp is one raw heartbeat of writer w at sequence seq.
type heartbeatOp func(ctx context.Context, w int, seq uint64) error

// mixer spreads each writer's heartbeats over renewals and writes as
// Talon's store does (writesStatus), and counts the renewals. Writer w's
// entries are touched only by the goroutine Run gives it, and Runs do not
// overlap.
type mixer struct {
	seq       []uint64 // the last heartbeat sequence of each writer
	statusSeq []uint64 // the sequence each writer last wrote the record at
	renewals  atomic.Int64
}

// newMixer returns the mixer of writers writers whose records were
// written at sequence 0.
func newMixer(writers int) *mixer {
	return &mixer{seq: make([]uint64, writers), statusSeq: make([]uint64, writers)}
}

// op returns Run's operation for one phase: writer w's next heartbeat,
// through renew or write as writesStatus decides with statusEvery. A write
// that fails leaves the record's status where it was, so the writer's
// next heartbeat writes again, as a coordinator's would.
func (m *mixer) op(statusEvery uint64, renew, write heartbeatOp) func(ctx context.Context, w int) error {
	m.renewals.Store(0)
	return func(ctx context.Context, w int) error {
		m.seq[w]++
		seq := m.seq[w]
		if !writesStatus(seq, m.statusSeq[w], statusEvery) {
			err := renew(ctx, w, seq)
			if err == nil {
				m.renewals.Add(1)
			}
			return err
		}
		err := write(ctx, w, seq)
		if err == nil {
			m.statusSeq[w] = seq
		}
		return err
	}
}
