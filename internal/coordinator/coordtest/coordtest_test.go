package coordtest_test

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator/coordtest"
	"github.com/talonhq/talon/internal/state/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFakeClock(t *testing.T) {
	t0 := time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC)
	c := coordtest.NewFakeClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	time.Sleep(5 * time.Millisecond)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("the clock moved on its own: %v", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), t0.Add(800*time.Second); !got.Equal(want) {
		t.Fatalf("after 800 concurrent advances of 1s: %v, want %v", got, want)
	}
	c.Set(t0.Add(-time.Hour))
	if got, want := c.Now(), t0.Add(-time.Hour); !got.Equal(want) {
		t.Fatalf("after Set backwards: %v, want %v", got, want)
	}
}

func TestSyncBuffer(t *testing.T) {
	var b coordtest.SyncBuffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 50 {
				if n, err := fmt.Fprintf(&b, "%d", i); n != 1 || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	got := b.String()
	if len(got) != 200 {
		t.Fatalf("%d bytes written, want 200: %q", len(got), got)
	}
	for i := range 4 {
		if n := strings.Count(got, fmt.Sprint(i)); n != 50 {
			t.Errorf("%d writes of %d, want 50", n, i)
		}
	}
}

// fatalTB is a testing.TB whose Fatalf sends its message on fatal and
// then ends the goroutine, as testing.T's does.
type fatalTB struct {
	testing.TB
	fatal chan<- string
}

func (fatalTB) Helper() {}

func (f fatalTB) Fatalf(format string, args ...any) {
	f.fatal <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitFor(t *testing.T) {
	t.Run("condition met", func(t *testing.T) {
		calls := 0
		coordtest.WaitFor(t, 5*time.Second, "three calls", func() bool { calls++; return calls == 3 })
		if calls != 3 {
			t.Fatalf("cond called %d times, want 3", calls)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		fatal := make(chan string, 1)
		returned := make(chan struct{})
		start := time.Now()
		go func() {
			coordtest.WaitFor(fatalTB{TB: t, fatal: fatal}, 100*time.Millisecond, "nothing", func() bool { return false })
			close(returned)
		}()
		select {
		case msg := <-fatal:
			if want := "timed out after 100ms waiting for nothing"; msg != want {
				t.Fatalf("failure %q, want %q", msg, want)
			}
		case <-returned:
			t.Fatal("WaitFor returned although the condition never held")
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Fatalf("gave up after %v, before the timeout", d)
		}
	})
}

func TestStart(t *testing.T) {
	c := coordtest.Start(t, coordtest.Options{WaitReady: true, Admin: &config.AdminConfig{ExposeHealth: true}})
	if c.Memory == nil || c.Store != c.Memory {
		t.Fatalf("Store %v, Memory %v: want a new memory store in both", c.Store, c.Memory)
	}
	if !c.Readiness().Ready {
		t.Fatalf("not ready after Start with WaitReady: %v", c.Readiness().Reasons)
	}
	r := c.Record()
	if r == nil || r.ClusterID != "test" || r.NodeID != "coord-a" || r.Address != c.ControlAddr || !r.Ready {
		t.Fatalf("own record %+v, want ready coord-a of test at %s", r, c.ControlAddr)
	}
	nc, err := net.Dial("tcp", c.ControlAddr)
	if err != nil {
		t.Fatalf("control listener: %v", err)
	}
	nc.Close()
	resp, err := http.Get(c.AdminURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /readyz: %d, want 200", resp.StatusCode)
	}
	families, err := c.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"talon_build_info", "talon_ready", "talon_coordinator_snapshot_age_seconds", "talon_admin_requests_total"} {
		if !names[want] {
			t.Errorf("registry lacks %s", want)
		}
	}

	c.Stop()
	if c.Readiness().Ready {
		t.Error("ready after Stop")
	}
	if r := c.Record(); r != nil {
		t.Errorf("own record left after Stop: %+v", r)
	}
	c.Stop() // a second Stop (and the cleanup's) does nothing
}

// TestStartGivenStore runs a coordinator over the caller's store, with
// names, labels, an advertised address and clocks, in a subtest: when the
// subtest ends the coordinator has gone and the store is still open.
func TestStartGivenStore(t *testing.T) {
	storeClock := coordtest.NewFakeClock(time.Now().Add(-time.Hour).Truncate(time.Millisecond))
	store := memory.New(memory.Options{Clock: storeClock.Now})
	defer store.Close()
	key := cluster.Key{ClusterID: "given", Role: cluster.RoleCoordinator, NodeID: "coord-z"}
	t.Run("running", func(t *testing.T) {
		c := coordtest.Start(t, coordtest.Options{
			ClusterID: "given", NodeID: "coord-z", Advertise: "coord-z.test:7400", Labels: map[string]string{"zone": "z"},
			Timing: cluster.Timing{HeartbeatInterval: 50 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: time.Hour},
			Store:  store, WaitReady: true,
		})
		if c.Memory != nil || c.Store != store {
			t.Fatalf("Store %v, Memory %v: want the given store and no memory store of Start's", c.Store, c.Memory)
		}
		if c.AdminServer != nil || c.AdminURL != "" {
			t.Fatalf("admin server %v at %q without Options.Admin", c.AdminServer, c.AdminURL)
		}
		r := c.Record()
		if r == nil || r.Address != "coord-z.test:7400" || r.Labels["zone"] != "z" || r.UpdatedAtUnixMs != storeClock.Now().UnixMilli() {
			t.Fatalf("own record %+v, want coord-z.test:7400, zone z, updated at the store clock %v", r, storeClock.Now())
		}
	})
	snap, err := store.Snapshot(context.Background(), "given")
	if err != nil {
		t.Fatalf("the given store after the test: %v", err)
	}
	if r := snap.Find(key); r != nil {
		t.Fatalf("own record left after the test: %+v", r)
	}
}

// TestOnlyTestsImport keeps coordtest out of the binaries: no non-test Go
// file in the module imports it.
func TestOnlyTestsImport(t *testing.T) {
	const self = "github.com/talonhq/talon/internal/coordinator/coordtest"
	root := filepath.Join("..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			if strings.Trim(imp.Path.Value, `"`) == self {
				t.Errorf("%s imports %s; only tests may", path, self)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d non-test Go files below %s; the walk missed the module", files, root)
	}
}
