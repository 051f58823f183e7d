package talontest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/testsupport"
)

// BlockSize is the block size of the workers WorkerArgs starts.
const BlockSize = 1 << 20

// WriteBlob writes size pseudo-random bytes (from seed) to the object name
// under the file blob store dir and returns them.
func WriteBlob(t *testing.T, dir, name string, size int, seed uint64) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// Cluster3 is one coordinator and its workers, without TLS, with a
// client reading objects through them.
type Cluster3 struct {
	Ctl     string
	Coord   *Proc
	Workers map[string]*Proc
	Reader  *client.ObjectReader
}

// StartCluster starts a coordinator and nworkers workers on the file blob
// store blobs and waits until every worker is eligible.
func StartCluster(t *testing.T, blobs string, nworkers int, workerExtra ...string) *Cluster3 {
	t.Helper()
	c := &Cluster3{Ctl: FreeAddr(t), Workers: map[string]*Proc{}}
	c.Coord = Start(t, "coordinator", CoordinatorArgs("coord", c.Ctl, FreeAddr(t))...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return Ready(t, c.Coord) })
	for i := 1; i <= nworkers; i++ {
		id := fmt.Sprintf("worker-%d", i)
		c.Workers[id] = Start(t, id, WorkerArgs(id, FreeAddr(t), FreeAddr(t), []string{c.Ctl}, blobs, t.TempDir(), workerExtra...)...)
	}
	testsupport.WaitFor(t, 20*time.Second, "workers healthy", func() bool {
		cl, err := c.Coord.API(t).Cluster(context.Background())
		return err == nil && cl.Nodes.Workers.Healthy == nworkers && cl.EligibleWorkers == nworkers
	})
	c.Reader = NewReader(t, c.Ctl)
	return c
}

// NewReader returns an object reader through the coordinator at ctl
// (replicas 2, BlockSize), closed when t ends.
func NewReader(t *testing.T, ctl string) *client.ObjectReader {
	t.Helper()
	cl, err := client.New(client.Options{Coordinators: []string{ctl}, CacheTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: BlockSize, Replicas: 2}
}

// Read reads object through the cluster, failing t on an error.
func (c *Cluster3) Read(t *testing.T, object string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := c.Reader.ReadObject(context.Background(), object, &buf); err != nil {
		t.Fatalf("read %s: %v", object, err)
	}
	return buf.Bytes()
}

// Usage sums the workers' live counters.
func (c *Cluster3) Usage(t *testing.T) (hits, misses, evictions uint64, perWorker map[string]apiv1.Usage) {
	t.Helper()
	perWorker = map[string]apiv1.Usage{}
	for id, w := range c.Workers {
		if w.Exited() {
			continue
		}
		st, err := w.API(t).Status(context.Background())
		if err != nil || st.Current == nil {
			t.Fatalf("status of %s: %v", id, err)
		}
		u := *st.Current
		perWorker[id] = u
		hits += u.Counters.HitsTotal
		misses += u.Counters.MissesTotal
		evictions += u.Counters.EvictionsTotal
	}
	return hits, misses, evictions, perWorker
}
