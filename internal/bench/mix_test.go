package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
)

// TestWritesStatusIsTheStoresRule checks the raw writers' rule against
// the one Talon's coordinators apply (cluster.NeedsStatusWrite) for a
// record whose status does not change.
func TestWritesStatusIsTheStoresRule(t *testing.T) {
	rec := Record("bench", "w", 1)
	for _, every := range []uint64{0, 1, 2, 12, 720} {
		for statusSeq := uint64(0); statusSeq < 30; statusSeq += 7 {
			for seq := uint64(0); seq < 1500; seq++ {
				stored, incoming := rec.Clone(), rec.Clone()
				stored.HeartbeatSeq, incoming.HeartbeatSeq = statusSeq, seq
				if got, want := writesStatus(seq, statusSeq, every), cluster.NeedsStatusWrite(stored, incoming, every); got != want {
					t.Fatalf("writesStatus(%d, %d, %d) = %t, cluster.NeedsStatusWrite says %t", seq, statusSeq, every, got, want)
				}
			}
		}
	}
}

// countingStore counts what the mixer sends: renewals and writes per
// writer.
type countingStore struct {
	renewals, writes []int
	failWrites       int // the next failWrites writes fail
}

func (c *countingStore) renew(_ context.Context, w int, _ uint64) error { c.renewals[w]++; return nil }

func (c *countingStore) write(_ context.Context, w int, _ uint64) error {
	if c.failWrites > 0 {
		c.failWrites--
		return errors.New("write refused")
	}
	c.writes[w]++
	return nil
}

func TestMixerProportions(t *testing.T) {
	const writers = 3
	statusEvery := cluster.Timing{HeartbeatInterval: 5e9, StatusInterval: 60e9}.StatusEvery() // the defaults: 12
	tests := []struct {
		name          string
		every         uint64
		beats         int // per writer
		renew, writes int // per writer
	}{
		{"defaults: 11 renewals to 1 write", statusEvery, 120, 110, 10},
		{"partial interval", statusEvery, 30, 28, 2},
		{"status-interval 0: every heartbeat writes", 0, 50, 0, 50},
		{"every heartbeat a status", 1, 50, 0, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingStore{renewals: make([]int, writers), writes: make([]int, writers)}
			m := newMixer(writers)
			op := m.op(tt.every, c.renew, c.write)
			for range tt.beats {
				for w := range writers {
					if err := op(context.Background(), w); err != nil {
						t.Fatal(err)
					}
				}
			}
			for w := range writers {
				if c.renewals[w] != tt.renew || c.writes[w] != tt.writes {
					t.Fatalf("writer %d: %d renewals, %d writes; want %d and %d", w, c.renewals[w], c.writes[w], tt.renew, tt.writes)
				}
			}
			if got := int(m.renewals.Load()); got != writers*tt.renew {
				t.Fatalf("mixer counted %d renewals, want %d", got, writers*tt.renew)
			}
		})
	}
}

// TestMixerRetriesAFailedWrite: a write that fails leaves the status
// where it was, so the next heartbeat writes again, as a coordinator's
// would; the sequence goes on.
func TestMixerRetriesAFailedWrite(t *testing.T) {
	c := &countingStore{renewals: make([]int, 1), writes: make([]int, 1)}
	m := newMixer(1)
	op := m.op(12, c.renew, c.write)
	for range 11 {
		if err := op(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
	}
	c.failWrites = 2
	for i := range 3 {
		err := op(context.Background(), 0)
		if (err != nil) != (i < 2) {
			t.Fatalf("heartbeat %d: %v", 12+i, err)
		}
	}
	if c.renewals[0] != 11 || c.writes[0] != 1 || m.seq[0] != 14 || m.statusSeq[0] != 14 {
		t.Fatalf("%d renewals, %d writes, seq %d, status at %d", c.renewals[0], c.writes[0], m.seq[0], m.statusSeq[0])
	}
	// A new phase starts counting renewals from zero; the sequences go on.
	op = m.op(12, c.renew, c.write)
	if m.renewals.Load() != 0 {
		t.Fatal("renewals not reset")
	}
	for range 12 {
		_ = op(context.Background(), 0)
	}
	if c.renewals[0] != 22 || c.writes[0] != 2 {
		t.Fatalf("after a second phase: %d renewals, %d writes", c.renewals[0], c.writes[0])
	}
}

func TestParseMix(t *testing.T) {
	for _, m := range Mixes {
		if got, err := ParseMix(string(m)); err != nil || got != m {
			t.Fatalf("ParseMix(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseMix("both"); err == nil {
		t.Fatal("ParseMix(both): no error")
	}
}
