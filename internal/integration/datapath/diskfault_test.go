package datapath

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestBrokenCacheDirectory breaks a worker's cache directory while it
// serves (its blocks directory replaced by a file: every block write fails,
// as on a read-only or failed disk; tests run as root, so permissions would
// not stop writes). Reads stay correct (the worker reads through to the
// blob store), the worker reports degraded, then turns unready so
// placement moves away, and counts the failures.
func TestBrokenCacheDirectory(t *testing.T) {
	talontest.SkipShort(t)
	blobs := t.TempDir()
	const objects = 40
	want := map[string][]byte{}
	for i := range objects {
		name := fmt.Sprintf("obj-%02d", i)
		want[name] = talontest.WriteBlob(t, blobs, name, talontest.BlockSize+100, uint64(i))
	}
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t))...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	cacheDir := t.TempDir()
	broken := talontest.Start(t, "worker-1", talontest.WorkerArgs("worker-1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, cacheDir)...)
	talontest.Start(t, "worker-2", talontest.WorkerArgs("worker-2", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir())...)
	testsupport.WaitFor(t, 20*time.Second, "two eligible workers", func() bool {
		c, err := coord.API(t).Cluster(context.Background())
		return err == nil && c.EligibleWorkers == 2
	})
	blocks := filepath.Join(cacheDir, "blocks")
	if err := os.RemoveAll(blocks); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blocks, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Options{Coordinators: []string{ctl}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reader := &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: talontest.BlockSize, Replicas: 1} // one worker is left eligible: no second digest source
	read := func(name string) {
		var buf bytes.Buffer
		if _, err := reader.ReadObject(context.Background(), name, &buf); err != nil || !bytes.Equal(buf.Bytes(), want[name]) {
			t.Fatalf("read %s with a broken cache directory: %v (correct %t)", name, err, bytes.Equal(buf.Bytes(), want[name]))
		}
	}
	// Read everything (misses on both workers) until worker-1 is unready.
	i := 0
	testsupport.WaitFor(t, 30*time.Second, "worker-1 unready", func() bool {
		read(fmt.Sprintf("obj-%02d", i%objects))
		i++
		return !talontest.Ready(t, broken)
	})
	// Its next record says so, and placement moves away.
	testsupport.WaitFor(t, 10*time.Second, "worker-1's record not ready, one eligible worker", func() bool {
		n, err := coord.API(t).Node(context.Background(), "worker-1")
		c, cerr := coord.API(t).Cluster(context.Background())
		return err == nil && cerr == nil && !n.Node.Ready && n.Node.Health == "degraded" && c.EligibleWorkers == 1
	})
	// Reads keep working on the remaining worker.
	for name := range want {
		read(name)
	}
	resp, err := http.Get("http://" + broken.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m bytes.Buffer
	_, _ = m.ReadFrom(resp.Body)
	if !bytes.Contains(m.Bytes(), []byte("talon_worker_cache_disk_errors_total")) || bytes.Contains(m.Bytes(), []byte("talon_worker_cache_disk_errors_total 0\n")) {
		t.Fatalf("disk errors not counted:\n%s", m.String())
	}
}
