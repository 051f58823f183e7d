package talontest

// Support of the mixed-version suite (internal/integration/upgrade,
// issue 46): the previous release's talon binary, and a watch on the store
// that counts the late marks of worker records, whichever version's
// coordinator applied them.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	clientv3 "go.etcd.io/etcd/client/v3"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state/kube"
)

// previous holds the previous release's binary, built at most once per
// test binary.
var previous struct {
	once sync.Once
	bin  string
	err  error
	out  string
}

// PreviousRelease returns the path of the previous release's talon binary
// (TALON_PREVIOUS_BIN, or built and cached by
// internal/testenv/build-previous.sh from the repository's history).
func PreviousRelease(t *testing.T) string {
	t.Helper()
	previous.once.Do(func() {
		if p := os.Getenv("TALON_PREVIOUS_BIN"); p != "" {
			previous.bin = p
			return
		}
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "testenv", "build-previous.sh")
		cmd := exec.Command("bash", script)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		previous.bin, previous.err, previous.out = strings.TrimSpace(string(out)), err, stderr.String()
	})
	if previous.err != nil {
		t.Fatalf("build the previous release: %v\n%s", previous.err, previous.out)
	}
	return previous.bin
}

// BinaryVersion returns the build version the talon binary bin reports
// (talon version).
func BinaryVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "version: "); ok {
			return v
		}
	}
	t.Fatalf("%s version: no version line in %q", bin, out)
	return ""
}

// LateMarks counts, from a watch on the store, the writes that put a late
// mark on a worker record: a coordinator's judgement that the worker was
// silent for unhealthy-after. In the mixed-version suite every worker is
// alive throughout, so every one is a false mark.
type LateMarks struct {
	n      atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	nodes map[string]int // guarded by mu
}

// WatchLateMarks starts counting late marks of worker records in c's
// store (etcd or Kubernetes) until Stop or the end of the test.
func (c *LiveCluster) WatchLateMarks(t *testing.T) *LateMarks {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lm := &LateMarks{cancel: cancel, done: make(chan struct{}), nodes: map[string]int{}}
	switch {
	case c.EtcdClient != nil:
		ch := c.EtcdClient.Watch(clientv3.WithRequireLeader(ctx), "/talon/clusters/it/nodes/worker/", clientv3.WithPrefix())
		go lm.etcd(ch)
	case c.Clientset != nil:
		w, err := c.Clientset.CoordinationV1().Leases("talon").Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=talon,talon.io/role=worker"})
		if err != nil {
			cancel()
			t.Fatalf("watch leases: %v", err)
		}
		go lm.kube(ctx, w)
	default:
		cancel()
		t.Fatal("WatchLateMarks: the cluster has no etcd or Kubernetes client")
	}
	t.Cleanup(lm.Stop)
	return lm
}

func (lm *LateMarks) note(value []byte) {
	rec, err := cluster.Decode(value)
	if err != nil || !rec.Late {
		return
	}
	lm.n.Add(1)
	lm.mu.Lock()
	lm.nodes[rec.NodeID]++
	lm.mu.Unlock()
}

func (lm *LateMarks) etcd(ch clientv3.WatchChan) {
	defer close(lm.done)
	for resp := range ch {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				lm.note(ev.Kv.Value)
			}
		}
	}
}

func (lm *LateMarks) kube(ctx context.Context, w watch.Interface) {
	defer close(lm.done)
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if l, isLease := ev.Object.(*coordv1.Lease); isLease && (ev.Type == watch.Modified || ev.Type == watch.Added) {
				lm.note([]byte(l.Annotations[kube.AnnotationStatus]))
			}
		}
	}
}

// Count returns the late marks seen so far.
func (lm *LateMarks) Count() int { return int(lm.n.Load()) }

// Nodes returns the late marks seen so far by worker.
func (lm *LateMarks) Nodes() map[string]int {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	out := make(map[string]int, len(lm.nodes))
	for k, v := range lm.nodes {
		out[k] = v
	}
	return out
}

// Stop ends the watch (once) and waits for it.
func (lm *LateMarks) Stop() {
	lm.cancel()
	<-lm.done
}
