package security

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// lyingWorker is a compromised worker: it holds a valid worker credential,
// keeps its record alive over the control protocol, and its data port
// answers every read with wrong bytes of the right length, and every
// digest with the digest of those wrong bytes.
func lyingWorker(t *testing.T, p *talontest.PKI, ctl, node string, objectSize int64) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, digest := strings.CutPrefix(r.URL.Path, datav1.DigestPrefix)
		// It claims whatever object version it is asked for.
		serveForged(w, r, key, digest, objectSize, r.URL.Query().Get("version"), 0xEE)
	})
	rogueWorker(t, p, ctl, node, h)
}

// TestLyingWorkerNeverYieldsWrongBytes: a worker that owns blocks and
// serves wrong bytes (and lies about their digest) cannot make `talon get`
// exit 0 with wrong data: without the store, get fails reporting the
// disagreement; with --source it reads the disputed blocks from the store.
// Without verification the liar wins (the review's attack), which shows
// the test bites.
func TestLyingWorkerNeverYieldsWrongBytes(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	blobs := t.TempDir()
	const size = 12*talontest.BlockSize + 5
	want := talontest.WriteBlob(t, blobs, "big.bin", size, 3)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("worker-%d", i)
		talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), p.Args(t, pki.RoleWorker, id)...)...)
	}
	lyingWorker(t, p, ctl, "liar", size)
	testsupport.WaitFor(t, 20*time.Second, "three eligible workers", func() bool {
		cl, err := coord.API(t).Cluster(context.Background())
		return err == nil && cl.EligibleWorkers == 3
	})
	// The liar owns some blocks as first owner.
	owned := 0
	for b := range 13 {
		pl, err := coord.API(t).Placement(context.Background(), datav1.BlockKey("big.bin", int64(b)), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.Owners) == 1 && pl.Owners[0].NodeID == "liar" {
			owned++
		}
	}
	if owned == 0 {
		t.Fatal("the liar owns no block; the test would prove nothing")
	}
	f := p.Files(t, pki.RoleClient, "reader")
	creds := []string{"--coordinators", ctl, "--block-size", "1MiB", "--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile}
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		args     []string
		mayFail  bool // exit non-zero naming the liar is acceptable
		wantOK   bool // must succeed with the right bytes
		insecure bool // without verification: the attack works
	}{
		{"one replica", []string{"--replicas", "1"}, true, false, false},
		{"two replicas", []string{"--replicas", "2"}, true, false, false},
		{"two replicas with the store", []string{"--replicas", "2", "--source", "file://" + blobs}, false, true, false},
		{"verification off", []string{"--replicas", "1", "--verify=false"}, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			res := talontest.RunTalon(t, nil, append(append([]string{"get", "big.bin", "-o", out}, creds...), tc.args...)...)
			got, _ := os.ReadFile(out)
			correct := res.Code == 0 && bytes.Equal(got, want)
			switch {
			case tc.insecure:
				if res.Code != 0 || bytes.Equal(got, want) {
					t.Fatalf("without verification: exit %d, correct %t; the liar's bytes should have been written (the attack)", res.Code, bytes.Equal(got, want))
				}
			case res.Code == 0 && !correct:
				t.Fatalf("talon get exit 0 with wrong bytes:\n%s", res.Stderr)
			case tc.wantOK && !correct:
				t.Fatalf("talon get: exit %d, want the right object:\n%s", res.Code, res.Stderr)
			case res.Code != 0 && !(tc.mayFail && strings.Contains(res.Stderr, "liar")):
				t.Fatalf("talon get failed without naming the liar: exit %d\n%s", res.Code, res.Stderr)
			}
			if !tc.insecure && !strings.Contains(res.Stderr, "failed verification") {
				t.Fatalf("no verification failure reported:\n%s", res.Stderr)
			}
		})
	}
}
