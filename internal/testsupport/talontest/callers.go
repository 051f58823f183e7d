package talontest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
)

// The fault schedule's load: ScheduleWorkers workers, ScheduleCallers
// callers looking up ScheduleKeys keys, each pausing CallPace between
// lookups.
const (
	ScheduleWorkers = 4
	ScheduleCallers = 4
	ScheduleKeys    = 64
	// CallDeadline is each client operation's deadline; its attempt
	// deadline is a third of it (client.Options.AttemptTimeout unset).
	CallDeadline = 2 * time.Second
	CallPace     = 20 * time.Millisecond
	// ClientLife is how many calls a caller makes with one client.
	ClientLife = 25
	// DrainDelay is the coordinators' drain delay in the suite: clients
	// are served through it, then told to go.
	DrainDelay = 500 * time.Millisecond
)

// Row is one schedule's figures.
type Row struct {
	Attempted      int
	Failed         map[string]int
	MaxLatency     time.Duration
	LostHeartbeats int
	Dropped        int // 200 cluster answers naming fewer than the live workers
	Wrong          int // answers with another owner or placement version than the steady one
	RecordsLost    []string
	// NotReadyMax is the longest a not_ready answer took, among direct
	// lookups sent once the outage was a request timeout old.
	NotReadyMax time.Duration
	NotReadyN   int
}

// FailedTotal is the number of failed calls of every code.
func (r Row) FailedTotal() int {
	n := 0
	for _, v := range r.Failed {
		n += v
	}
	return n
}

// FailedString lists the failed calls by code, sorted.
func (r Row) FailedString() string {
	if len(r.Failed) == 0 {
		return "0"
	}
	var parts []string
	for k, v := range r.Failed {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Callers are the client load: scheduleCallers goroutines, each with its
// own failover client over every coordinator (rotated), looking up keys in
// turn every callPace, each lookup with CallDeadline.
type Callers struct {
	StopCh chan struct{}
	WG     sync.WaitGroup

	Want    map[string]string // key -> steady owner
	Version placement.Version

	mu   sync.Mutex
	recs []Call // guarded by mu
}

// Call is one lookup a caller made.
type Call struct {
	At      time.Time
	Latency time.Duration
	Code    string // "" for success
	Wrong   bool
}

// One makes one lookup of key with cl and records nothing (see Add).
func (cs *Callers) One(cl *client.Client, key string) Call {
	ctx, cancel := context.WithTimeout(context.Background(), CallDeadline)
	defer cancel()
	began := time.Now()
	p, err := cl.Lookup(ctx, key, 1)
	r := Call{At: began, Latency: time.Since(began)}
	var pe *protocol.Error
	switch {
	case err == nil:
		r.Wrong = p.Version != cs.Version || len(p.Owners) == 0 || p.Owners[0].NodeID != cs.Want[key]
	case errors.As(err, &pe):
		r.Code = pe.Code.String()
	case errors.Is(err, client.ErrNoCoordinator):
		r.Code = "no_coordinator"
	case errors.Is(err, context.DeadlineExceeded):
		r.Code = "deadline"
	default:
		r.Code = "other"
	}
	return r
}

// Add records r.
func (cs *Callers) Add(r Call) {
	cs.mu.Lock()
	cs.recs = append(cs.recs, r)
	cs.mu.Unlock()
}

// Stop stops the callers (once) and waits for them.
func (cs *Callers) Stop() {
	select {
	case <-cs.StopCh:
	default:
		close(cs.StopCh)
	}
	cs.WG.Wait()
}

// Figures summarises the calls sent in [from, to).
func (cs *Callers) Figures(from, to time.Time) Row {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	r := Row{Failed: map[string]int{}}
	for _, c := range cs.recs {
		if c.At.Before(from) || !c.At.Before(to) {
			continue
		}
		r.Attempted++
		r.MaxLatency = max(r.MaxLatency, c.Latency)
		if c.Code != "" {
			r.Failed[c.Code]++
		}
		if c.Wrong {
			r.Wrong++
		}
	}
	return r
}

// StartCallers looks up ScheduleKeys keys once to learn their steady
// owners and placement version, then starts ScheduleCallers callers until
// Stop or the end of the test.
func StartCallers(t *testing.T, c *LiveCluster, ctls []string) *Callers {
	t.Helper()
	cs := &Callers{StopCh: make(chan struct{}), Want: map[string]string{}}
	ref, err := client.New(client.Options{Coordinators: ctls, TLS: c.Client})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i := range ScheduleKeys {
		key := fmt.Sprintf("fault/%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p, err := ref.Lookup(ctx, key, 1)
		cancel()
		if err != nil {
			t.Fatalf("steady lookup of %s: %v", key, err)
		}
		if i > 0 && p.Version != cs.Version {
			t.Fatalf("steady lookups saw versions %s and %s", cs.Version, p.Version)
		}
		cs.Want[key], cs.Version = p.Owners[0].NodeID, p.Version
	}
	for n := range ScheduleCallers {
		cs.WG.Add(1)
		go func() {
			defer cs.WG.Done()
			var cl *client.Client
			defer func() { cl.Close() }()
			for i := n; ; i++ {
				if i%ClientLife == n {
					// A new client, its list rotated by one more: new
					// clients arrive all the time, and each starts at
					// the first address of its list, so every
					// coordinator is some new client's first choice.
					if cl != nil {
						cl.Close()
					}
					var err error
					if cl, err = client.New(client.Options{Coordinators: Rotate(ctls, n+i/ClientLife), TLS: c.Client}); err != nil {
						panic(err)
					}
				}
				select {
				case <-cs.StopCh:
					return
				case <-time.After(CallPace):
				}
				cs.Add(cs.One(cl, fmt.Sprintf("fault/%d", i%ScheduleKeys)))
			}
		}()
	}
	t.Cleanup(cs.Stop)
	return cs
}

// Rotate returns list rotated left by by places.
func Rotate(list []string, by int) []string {
	out := make([]string, len(list))
	for i := range list {
		out[i] = list[(i+by)%len(list)]
	}
	return out
}
