package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestWarmSurvivesCoordinatorRestart: a warm started through coord-a on
// etcd goes on while coord-a is killed and restarted: the job lives in
// the store, the workers fail over to coord-b, which hands them the job
// and folds their progress; it ends done, every block loaded, and both
// coordinators answer the same job. Workers load 4 blocks a second, so
// the kill lands mid-job.
func TestWarmSurvivesCoordinatorRestart(t *testing.T) {
	talontest.SkipShort(t)
	etcd := testenv.StartEtcd(t, testenv.EtcdOptions{})
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(tokens, []byte("ops:read,operate,metrics:"+talontest.OpsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--ha", "--coordinator-replicas", "2"}
	coord := func(id string) *talontest.Proc {
		args := []string{"coordinator", "--cluster-id", "it", "--node-id", id, "--listen", talontest.FreeAddr(t), "--admin-listen", talontest.FreeAddr(t),
			"--log-level", "info", "--admin-token-file", tokens}
		return talontest.Start(t, id, append(append(append(args, opsTiming...), store...), talontest.InsecureArgs...)...)
	}
	a, b := coord("coord-a"), coord("coord-b")
	testsupport.WaitFor(t, 30*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	blobs := t.TempDir()
	talontest.WriteBlob(t, blobs, "ds/big.bin", 48<<20, 3)
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("w-%d", i)
		args := []string{"worker", "--cluster-id", "it", "--node-id", id, "--listen", talontest.FreeAddr(t), "--admin-listen", talontest.FreeAddr(t),
			"--coordinators", a.Addr + "," + b.Addr, "--blob-store", "file://" + blobs, "--cache-dir", t.TempDir(),
			"--cache-capacity", "128MiB", "--block-size", "1MiB", "--log-level", "info", "--warmup-rate", "4"}
		talontest.Start(t, id, append(append(args, opsTiming...), talontest.InsecureArgs...)...)
	}
	testsupport.WaitFor(t, 30*time.Second, "two eligible workers on both coordinators", func() bool {
		return len(talontest.EligibleOn(t, a)) == 2 && len(talontest.EligibleOn(t, b)) == 2
	})
	code, stdout, stderr := talontest.Ctl(t, []string{"http://" + a.Admin}, "warm", "ds/big.bin", "-o", "json")
	j := decodeJob(t, code, stdout, stderr)
	if j.Coordinator != "coord-a" {
		t.Fatalf("the job was taken by %s; want coord-a", j.Coordinator)
	}
	apiA, apiB := talontest.OpsAPI(t, a), talontest.OpsAPI(t, b)
	testsupport.WaitFor(t, 30*time.Second, "the warm under way", func() bool {
		got, err := apiB.Job(context.Background(), j.ID)
		return err == nil && got.BlocksDone > 0
	})
	a.Kill()
	killedAt := time.Now()
	mid, err := apiB.Job(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	a.Restart()
	var end *apiv1.Job
	testsupport.WaitFor(t, 90*time.Second, "the warm done through coord-b", func() bool {
		end, err = apiB.Job(context.Background(), j.ID)
		return err == nil && end.Ended()
	})
	t.Logf("job %s: %d of %d blocks when coord-a was killed; ended %s with %d of %d blocks on %d workers, %v after the kill",
		j.ID, mid.BlocksDone, mid.BlocksTotal, end.State, end.BlocksDone, end.BlocksTotal, end.WorkersDone, time.Since(killedAt).Round(time.Millisecond))
	if end.State != apiv1.JobDone || end.BlocksDone != end.BlocksTotal || end.BlocksTotal < 48 || mid.BlocksDone >= mid.BlocksTotal {
		t.Fatalf("after a coordinator restart mid-job: %+v (at the kill: %d of %d); want done, every block loaded, the kill mid-job", end, mid.BlocksDone, mid.BlocksTotal)
	}
	testsupport.WaitFor(t, 30*time.Second, "coord-a answering the same job", func() bool {
		got, err := apiA.Job(context.Background(), j.ID)
		return err == nil && got.State == end.State && got.BlocksDone == end.BlocksDone
	})
}

func decodeJob(t *testing.T, code int, stdout, stderr string) apiv1.Job {
	t.Helper()
	var j apiv1.Job
	if code != 0 || json.Unmarshal([]byte(stdout), &j) != nil || j.ID == "" {
		t.Fatalf("talonctl: exit %d\n%s\n%s", code, stdout, stderr)
	}
	return j
}
