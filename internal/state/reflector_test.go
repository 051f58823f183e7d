package state

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// fakeSource is a store for a reflector: List returns its entries at its
// revision; each Watch takes steps from a channel (changes to apply, or
// the error that ends it).
type fakeSource struct {
	t       *testing.T
	mu      sync.Mutex
	entries []*testEntry
	rev     uint64
	lists   int
	steps   chan step
	wg      sync.WaitGroup
}

type step struct {
	changes []MirrorChange[*testEntry]
	err     error
}

func newFakeSource(t *testing.T) *fakeSource {
	return &fakeSource{t: t, rev: 10, steps: make(chan step)}
}

func (f *fakeSource) list(context.Context) ([]*testEntry, uint64, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return slices.Clone(f.entries), f.rev, strconv.FormatUint(f.rev, 10), nil
}

func (f *fakeSource) watch(ctx context.Context, s Stream[*testEntry]) error {
	s.Established()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case st := <-f.steps:
			if st.err != nil {
				return st.err
			}
			s.Apply(st.changes)
		}
	}
}

// start runs a reflector over f until the test ends; ring is its ring
// size.
func (f *fakeSource) start(ring int, final func(error) bool) *Reflector[*testEntry] {
	return f.startWith(ring, final, nil)
}

// startWith is start with an Available hook.
func (f *fakeSource) startWith(ring int, final func(error) bool, available func(context.Context, uint64) error) *Reflector[*testEntry] {
	ctx, cancel := context.WithCancel(context.Background())
	r := NewReflector(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), ReflectorSource[*testEntry]{
		Name:      "test cache",
		List:      f.list,
		Watch:     f.watch,
		Record:    func(e *testEntry) (*cluster.Record, bool) { return e.rec, e.rec != nil },
		Final:     final,
		Available: available,
		Go: func(fn func()) bool {
			f.wg.Add(1)
			go func() { defer f.wg.Done(); fn() }()
			return true
		},
	}, ring)
	f.wg.Add(1)
	go func() { defer f.wg.Done(); r.Run() }()
	f.t.Cleanup(func() { cancel(); f.wg.Wait() })
	if !r.AwaitReady(context.Background()) {
		f.t.Fatal("reflector not ready after its first listing")
	}
	return r
}

// put and del build changes at revision rev.
func put(e *testEntry, rev uint64) MirrorChange[*testEntry] {
	return MirrorChange[*testEntry]{Name: e.name, Entry: e, Rev: rev, Token: strconv.FormatUint(rev, 10)}
}

func del(name string, rev uint64) MirrorChange[*testEntry] {
	return MirrorChange[*testEntry]{Name: name, Rev: rev, Token: strconv.FormatUint(rev, 10)}
}

// recv reads batches from ch until it holds n events or ends; it fails
// the test after 10 s.
func recv(t *testing.T, ch <-chan WatchBatch, n int) (got []string, err error) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case b, ok := <-ch:
			if !ok {
				return got, nil
			}
			if b.Err != nil {
				return got, b.Err
			}
			for _, ev := range b.Events {
				got = append(got, ev.Type.String()+" "+ev.Key.NodeID+"@"+ev.Revision.String())
			}
		case <-timeout:
			t.Fatalf("after %v: timed out waiting for %d events", got, n)
		}
	}
	return got, nil
}

// end waits for ch's terminal batch.
func end(t *testing.T, ch <-chan WatchBatch) error {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case b, ok := <-ch:
			if !ok {
				return nil
			}
			if b.Err != nil {
				if _, more := <-ch; more {
					t.Fatal("channel not closed after its error batch")
				}
				return b.Err
			}
		case <-timeout:
			t.Fatal("watch did not end in 10 s")
		}
	}
}

// TestReflectorSubscribe: a subscriber gets its cluster's changes after
// its revision, in order, replayed from the ring for what the reflector
// had applied already; a delete of a slot that held no readable record
// makes no event, and a put of an unreadable record over a readable one
// is a delete (a watcher sees what a snapshot would).
func TestReflectorSubscribe(t *testing.T) {
	f := newFakeSource(t)
	f.entries = []*testEntry{entry("a/w1", "a", cluster.RoleWorker, "w1")}
	r := f.start(0, nil)
	ctx := t.Context()

	w2, other := entry("a/w2", "a", cluster.RoleWorker, "w2"), entry("b/w9", "b", cluster.RoleWorker, "w9")
	f.steps <- step{changes: []MirrorChange[*testEntry]{put(w2, 11), put(other, 12), del("a/w1", 13)}}
	f.steps <- step{changes: []MirrorChange[*testEntry]{{Rev: 14, Token: "14"}}} // progress only
	if reached, _, err := r.WaitFor(ctx, 14, 0); !reached || err != nil {
		t.Fatalf("WaitFor(14) = %t, %v", reached, err)
	}

	// From the listing's revision: everything, replayed from the ring.
	early, ok := r.Subscribe(ctx, "a", 10)
	if !ok {
		t.Fatal("Subscribe: reflector off")
	}
	// From revision 11: w2's put was seen already.
	late, _ := r.Subscribe(ctx, "a", 11)

	unreadable := &testEntry{name: "a/w2", key: w2.key}
	f.steps <- step{changes: []MirrorChange[*testEntry]{del("a/gone", 15), put(w2, 16), put(unreadable, 17), put(unreadable, 18)}}

	want := []string{"put w2@11", "delete w1@13", "put w2@16", "delete w2@17"}
	if got, err := recv(t, early, len(want)); err != nil || !slices.Equal(got, want) {
		t.Errorf("watch from 10: %v, %v; want %v", got, err, want)
	}
	if got, err := recv(t, late, 3); err != nil || !slices.Equal(got, want[1:]) {
		t.Errorf("watch from 11: %v, %v; want %v", got, err, want[1:])
	}
	if n := r.Subscribers(); n != 2 {
		t.Errorf("%d subscribers, want 2", n)
	}
}

// TestReflectorRing: a revision the ring no longer covers ends the watch
// with ErrCompacted; one it covers is replayed.
func TestReflectorRing(t *testing.T) {
	f := newFakeSource(t)
	r := f.start(4, nil)
	var changes []MirrorChange[*testEntry]
	for i := range 6 {
		changes = append(changes, put(entry("a/w"+strconv.Itoa(i), "a", cluster.RoleWorker, "w"+strconv.Itoa(i)), uint64(11+i)))
	}
	f.steps <- step{changes: changes} // revisions 11..16; the ring keeps 13..16
	if reached, _, _ := r.WaitFor(t.Context(), 16, 0); !reached {
		t.Fatal("revision 16 not reached")
	}
	for _, tc := range []struct {
		after   uint64
		want    []string
		wantErr error
	}{
		{after: 10, wantErr: ErrCompacted},
		{after: 11, wantErr: ErrCompacted},
		{after: 12, want: []string{"put w2@13", "put w3@14", "put w4@15", "put w5@16"}},
		{after: 15, want: []string{"put w5@16"}},
		{after: 16},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		ch, _ := r.Subscribe(ctx, "a", tc.after)
		got, err := recv(t, ch, len(tc.want))
		if tc.wantErr != nil {
			err = end(t, ch)
		} else if len(tc.want) == 0 {
			select {
			case b := <-ch:
				t.Errorf("watch from %d: %+v, want nothing", tc.after, b)
			case <-time.After(50 * time.Millisecond):
			}
		}
		cancel()
		if !errors.Is(err, tc.wantErr) || !slices.Equal(got, tc.want) {
			t.Errorf("watch from %d: %v, %v; want %v, %v", tc.after, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestReflectorSlowSubscriber: a subscriber that does not read while more
// than the ring's worth of events arrives ends with ErrUnavailable,
// without holding the reflector up; the others go on.
func TestReflectorSlowSubscriber(t *testing.T) {
	f := newFakeSource(t)
	r := f.start(8, nil)
	ctx := t.Context()
	slow, _ := r.Subscribe(ctx, "a", 10)
	fast, _ := r.Subscribe(ctx, "a", 10)
	// The reading subscriber takes each event before the next is applied.
	for i := range 20 {
		f.steps <- step{changes: []MirrorChange[*testEntry]{put(entry("a/w", "a", cluster.RoleWorker, "w"), uint64(11+i))}}
		if got, err := recv(t, fast, 1); err != nil || len(got) != 1 {
			t.Fatalf("event %d: the reading subscriber got %v, %v", i, got, err)
		}
	}
	if err := end(t, slow); !errors.Is(err, ErrUnavailable) {
		t.Errorf("slow subscriber ended with %v, want ErrUnavailable", err)
	}
}

// TestReflectorResync: a lost watch ends every subscriber with its cause;
// the reflector lists again and serves new subscribers. A final error
// turns it off: Subscribe then says so, and the backend watches itself.
func TestReflectorResync(t *testing.T) {
	f := newFakeSource(t)
	r := f.start(0, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) })
	sub, _ := r.Subscribe(t.Context(), "a", 10)
	f.mu.Lock()
	f.rev = 20
	f.entries = []*testEntry{entry("a/w1", "a", cluster.RoleWorker, "w1")}
	f.mu.Unlock()
	f.steps <- step{err: ErrCompacted}
	if err := end(t, sub); !errors.Is(err, ErrCompacted) {
		t.Fatalf("subscriber ended with %v, want the watch's ErrCompacted", err)
	}
	if reached, _, err := r.WaitFor(t.Context(), 20, 0); !reached || err != nil {
		// WaitFor returns at once while not ready: poll until relisted.
		deadline := time.Now().Add(10 * time.Second)
		for !reached && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			reached, _ = r.Reached(20)
		}
		if !reached {
			t.Fatal("reflector did not list again at revision 20")
		}
	}
	var rec *cluster.Record
	r.Read(20, func(idx *Mirror[*testEntry], _ uint64, _ string) {
		if e, ok := idx.Get("a/w1"); ok {
			rec = e.rec
		}
	})
	if rec == nil || rec.NodeID != "w1" {
		t.Errorf("mirror after the relisting holds %v, want w1", rec)
	}
	if ch, _ := r.Subscribe(t.Context(), "a", 15); !errors.Is(end(t, ch), ErrCompacted) {
		t.Error("a revision before the relisting was not ErrCompacted")
	}
	sub, _ = r.Subscribe(t.Context(), "a", 20)
	f.steps <- step{changes: []MirrorChange[*testEntry]{del("a/w1", 21)}}
	if got, err := recv(t, sub, 1); err != nil || !slices.Equal(got, []string{"delete w1@21"}) {
		t.Errorf("after the relisting: %v, %v", got, err)
	}
	f.steps <- step{err: io.ErrUnexpectedEOF}
	if err := end(t, sub); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("subscriber ended with %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := r.Subscribe(t.Context(), "a", 21); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Subscribe still served after a final error")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f.lists != 2 {
		t.Errorf("%d listings, want 2", f.lists)
	}
}

// TestReflectorWaitFor: WaitFor returns when the revision is reached, when
// the limit passes, and with the context's error.
func TestReflectorWaitFor(t *testing.T) {
	f := newFakeSource(t)
	r := f.start(0, nil)
	if reached, ready, err := r.WaitFor(t.Context(), 12, 20*time.Millisecond); reached || !ready || err != nil {
		t.Errorf("limit: %t %t %v", reached, ready, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := r.WaitFor(ctx, 12, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx: %v", err)
	}
	go func() { f.steps <- step{changes: []MirrorChange[*testEntry]{{Rev: 12, Token: "12"}}} }()
	if reached, _, err := r.WaitFor(t.Context(), 12, 0); !reached || err != nil {
		t.Errorf("progress to 12: %t %v", reached, err)
	}
	if rev, tok := r.Revision(); rev != 12 || tok != "12" {
		t.Errorf("revision %d %q", rev, tok)
	}
}

// TestReflectorAvailable: before replaying, the reflector asks the store
// whether it still has the caller's revision: a compacted one ends the
// watch with ErrCompacted even though the ring could replay it, and one
// the store has but the ring does not cover (a snapshot older than the
// listing) is left to the backend's own watch (ok false).
func TestReflectorAvailable(t *testing.T) {
	f := newFakeSource(t)
	compactedBefore := uint64(12)
	r := f.startWith(0, nil, func(_ context.Context, after uint64) error {
		if after < compactedBefore {
			return ErrCompacted
		}
		return nil
	})
	f.steps <- step{changes: []MirrorChange[*testEntry]{put(entry("a/w1", "a", cluster.RoleWorker, "w1"), 11), put(entry("a/w2", "a", cluster.RoleWorker, "w2"), 12), put(entry("a/w3", "a", cluster.RoleWorker, "w3"), 13)}}
	if reached, _, _ := r.WaitFor(t.Context(), 13, 0); !reached {
		t.Fatal("revision 13 not reached")
	}
	if ch, ok := r.Subscribe(t.Context(), "a", 11); !ok || !errors.Is(end(t, ch), ErrCompacted) {
		t.Error("a compacted revision the ring holds was replayed")
	}
	ch, ok := r.Subscribe(t.Context(), "a", 12)
	if got, err := recv(t, ch, 1); !ok || err != nil || !slices.Equal(got, []string{"put w3@13"}) {
		t.Errorf("from 12: %v, %v", got, err)
	}
	compactedBefore = 0 // the hook runs on this goroutine
	if _, ok := r.Subscribe(t.Context(), "a", 9); ok {
		t.Error("a revision before the listing the store still has was not left to the backend")
	}
}
