package datapath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// readerToken has the read scope only.
const readerToken = "reader-token-5e2a81c3"

// TestWarmAndFree runs the operator's cache jobs on a live cluster (one
// coordinator, three workers on a file:// store, 1 MiB blocks, replicas
// 2): talonctl warm of a 64 MiB object makes the reads that follow all
// hits on the workers' counters; talonctl free of its prefix makes them
// all misses; a warm is cancelled half-way; -o json is parsed; a token
// without the operate scope is refused; the coordinator lists the jobs'
// start and end events. Read-ahead is off, so that every read of a block
// that is not resident counts a miss. Workers load at most 8 blocks a second
// (warmup-rate), so the cancel lands while the warm runs.
func TestWarmAndFree(t *testing.T) {
	talontest.SkipShort(t)
	blobs := t.TempDir()
	const size = 64 << 20
	data := talontest.WriteBlob(t, blobs, "ds/big.bin", size, 1)
	blocks := uint64(size / talontest.BlockSize)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("ops:read,operate,metrics:"+talontest.OpsToken+"\nreader:read:"+readerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &talontest.Cluster3{Ctl: talontest.FreeAddr(t), Workers: map[string]*talontest.Proc{}}
	c.Coord = talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", c.Ctl, talontest.FreeAddr(t), "--admin-token-file", tokens)...)
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("worker-%d", i)
		c.Workers[id] = talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{c.Ctl}, blobs, t.TempDir(),
			"--cache-capacity", "256MiB", "--warmup-rate", "8", "--read-ahead", "0")...)
	}
	servers := []string{"http://" + c.Coord.Admin}
	api := talontest.OpsAPI(t, c.Coord)
	testsupport.WaitFor(t, 30*time.Second, "three eligible workers", func() bool {
		cl, err := api.Cluster(t.Context())
		return err == nil && cl.EligibleWorkers == 3
	})
	c.Reader = talontest.NewReader(t, c.Ctl)

	// A token without the operate scope starts nothing.
	if code, body := talontest.Post(t, c.Coord, apiv1.PathJobs+"?op=warm&object=ds/big.bin", readerToken, http.Header{"X-Talon-Request": {"1"}}); code != http.StatusForbidden || !strings.Contains(body, "operate") {
		t.Fatalf("warm with a read-only token: %d %s; want 403 naming the operate scope", code, body)
	}
	if l, err := api.Jobs(t.Context()); err != nil || len(l.Items) != 0 {
		t.Fatalf("after a refused warm: %v jobs, %v; want none", l, err)
	}

	warm := runJob(t, servers, 0, "warm", "ds/big.bin", "--wait", "--interval", "200ms", "-o", "json")
	if warm.State != apiv1.JobDone || warm.WorkersDone != 3 || warm.BlocksDone != warm.BlocksTotal || uint64(warm.BlocksTotal) < blocks {
		t.Fatalf("warm: %+v; want done on 3 workers, every planned block loaded, at least %d blocks", warm, blocks)
	}
	hits0, misses0, _, _ := c.Usage(t)
	if got := c.Read(t, "ds/big.bin"); !bytes.Equal(got, data) {
		t.Fatal("read after warm: wrong bytes")
	}
	hits1, misses1, _, _ := c.Usage(t)
	t.Logf("warm %s: %d blocks (%d bytes) in %v; the read after it: %d hits, %d misses", warm.ID, warm.BlocksDone, warm.BytesDone,
		time.Duration(warm.EndedAtUnixMs-warm.CreatedAtUnixMs)*time.Millisecond, hits1-hits0, misses1-misses0)
	if misses1 != misses0 || hits1-hits0 < blocks {
		t.Fatalf("the read after warm: %d hits, %d misses; want at least %d hits and no miss", hits1-hits0, misses1-misses0, blocks)
	}

	free := runJob(t, servers, 0, "free", "ds/", "--wait", "-o", "json")
	if free.State != apiv1.JobDone || uint64(free.BlocksDone) < blocks {
		t.Fatalf("free: %+v; want done, at least %d blocks freed", free, blocks)
	}
	if got := c.Read(t, "ds/big.bin"); !bytes.Equal(got, data) {
		t.Fatal("read after free: wrong bytes")
	}
	hits2, misses2, _, _ := c.Usage(t)
	t.Logf("free %s: %d blocks freed; the read after it: %d hits, %d misses", free.ID, free.BlocksDone, hits2-hits1, misses2-misses1)
	if misses2-misses1 < blocks {
		t.Fatalf("the read after free: %d misses, %d hits; want every one of the %d blocks a miss", misses2-misses1, hits2-hits1, blocks)
	}

	checkCancel(t, servers, c)
	checkJobEvents(t, servers, warm.ID, free.ID)
}

// runJob runs talonctl with args, wants exit code want and returns the
// job its -o json printed.
func runJob(t *testing.T, servers []string, want int, args ...string) apiv1.Job {
	t.Helper()
	code, stdout, stderr := talontest.Ctl(t, servers, args...)
	var j apiv1.Job
	if code != want || json.Unmarshal([]byte(stdout), &j) != nil || j.ID == "" {
		t.Fatalf("talonctl %s: exit %d (want %d)\n%s\n%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return j
}

// checkCancel frees the object, starts a warm without --wait, cancels it
// once it has loaded some blocks, and checks that it ends cancelled
// short of its total and that --wait on it exits 1.
func checkCancel(t *testing.T, servers []string, c *talontest.Cluster3) {
	t.Helper()
	runJob(t, servers, 0, "free", "ds/big.bin", "--wait", "-o", "json")
	started := runJob(t, servers, 0, "warm", "ds/big.bin", "-o", "json")
	api := talontest.OpsAPI(t, c.Coord)
	testsupport.WaitFor(t, 30*time.Second, "the warm under way", func() bool {
		j, err := api.Job(t.Context(), started.ID)
		return err == nil && j.BlocksDone > 0
	})
	cancelled := runJob(t, servers, 0, "jobs", "cancel", started.ID, "-o", "json")
	if cancelled.State != apiv1.JobCancelled || cancelled.CancelledBy != "ops" {
		t.Fatalf("cancel: %+v; want cancelled by ops", cancelled)
	}
	final := runJob(t, servers, 1, "jobs", "get", started.ID, "--wait", "-o", "json")
	if final.State != apiv1.JobCancelled || final.BlocksDone >= final.BlocksTotal {
		t.Fatalf("after cancel: %+v; want cancelled short of its %d blocks", final, final.BlocksTotal)
	}
	// The workers stop within a heartbeat or two: the count settles.
	time.Sleep(time.Second)
	hits0, misses0, _, _ := c.Usage(t)
	c.Read(t, "ds/big.bin")
	hits1, misses1, _, _ := c.Usage(t)
	t.Logf("cancelled %s at %d of %d blocks; the read after it: %d hits, %d misses", final.ID, final.BlocksDone, final.BlocksTotal, hits1-hits0, misses1-misses0)
	if misses1 == misses0 {
		t.Fatal("the read after a cancelled warm missed nothing: the warm was not stopped")
	}
	code, stdout, _ := talontest.Ctl(t, servers, "jobs", "list", "-o", "json")
	var l apiv1.JobList
	if code != 0 || json.Unmarshal([]byte(stdout), &l) != nil || len(l.Items) != 4 {
		t.Fatalf("jobs list: exit %d, %d jobs\n%s; want the 4 jobs of this test", code, len(l.Items), stdout)
	}
	if code, _, stderr := talontest.Ctl(t, servers, "warm", strings.Repeat("k/", 3)+"*", "a", "b", "c", "d", "e", "f", "g", "h"); code != 2 || !strings.Contains(stderr, "at most 8") {
		t.Fatalf("warm of 9 targets: exit %d %s; want a usage error naming the limit 8", code, stderr)
	}
}

// checkJobEvents checks the coordinator lists the start and end of each
// job.
func checkJobEvents(t *testing.T, servers []string, ids ...string) {
	t.Helper()
	testsupport.WaitFor(t, 10*time.Second, "job events listed", func() bool {
		code, stdout, _ := talontest.Ctl(t, servers, "events", "--no-coalesce", "-o", "json")
		if code != 0 {
			return false
		}
		for _, id := range ids {
			for _, typ := range []string{"job_started", "job_ended"} {
				if !containsEvent(stdout, typ, id) {
					return false
				}
			}
		}
		return true
	})
}

func containsEvent(out, typ, id string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, typ) && strings.Contains(line, id) {
			return true
		}
	}
	return strings.Contains(out, `"`+typ+`"`) && strings.Contains(out, id)
}
