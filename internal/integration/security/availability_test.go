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

// TestOneOwnerCannotFailARead is the review's attack: an owner answering
// 404 or 416 to every request made `talon get` exit 1 without asking the
// other owners or the store. Now the read moves to the next owner.
func TestOneOwnerCannotFailARead(t *testing.T) {
	talontest.SkipShort(t)
	for _, status := range []int{http.StatusNotFound, http.StatusRequestedRangeNotSatisfiable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			p := talontest.NewPKI(t)
			blobs := t.TempDir()
			const size = 8*talontest.BlockSize + 3
			want := talontest.WriteBlob(t, blobs, "obj.bin", size, 5)
			ctl := talontest.FreeAddr(t)
			coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
			testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
			for i := 1; i <= 2; i++ {
				id := fmt.Sprintf("worker-%d", i)
				talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), p.Args(t, pki.RoleWorker, id)...)...)
			}
			rogueWorker(t, p, ctl, "refuser", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"error":{"code":"not_found","message":"no"}}`)
			}))
			testsupport.WaitFor(t, 20*time.Second, "three eligible workers", func() bool {
				cl, err := coord.API(t).Cluster(context.Background())
				return err == nil && cl.EligibleWorkers == 3
			})
			first := 0
			for b := range 9 {
				pl, err := coord.API(t).Placement(context.Background(), datav1.BlockKey("obj.bin", int64(b)), 1)
				if err == nil && len(pl.Owners) == 1 && pl.Owners[0].NodeID == "refuser" {
					first++
				}
			}
			if first == 0 {
				t.Fatal("the refusing worker is first owner of no block; the test would prove nothing")
			}
			f := p.Files(t, pki.RoleClient, "reader")
			out := filepath.Join(t.TempDir(), "out")
			res := talontest.RunTalon(t, nil, "get", "obj.bin", "-o", out, "--coordinators", ctl, "--block-size", "1MiB",
				"--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile, "-v")
			got, _ := os.ReadFile(out)
			if res.Code != 0 || !bytes.Equal(got, want) {
				t.Fatalf("get with an owner answering %d to everything (first owner of %d blocks): exit %d, right bytes %t\n%s", status, first, res.Code, bytes.Equal(got, want), res.Stderr)
			}
		})
	}
}

// TestRewriteInPlaceSeenByNextGet is the review's attack: after a
// same-size in-place rewrite of an object, `talon get` returned the old
// content from the caches with exit 0. Now the next get returns the new
// content (its first request asks the owner to revalidate the version, and
// every later request pins it).
func TestRewriteInPlaceSeenByNextGet(t *testing.T) {
	talontest.SkipShort(t)
	blobs := t.TempDir()
	const size = 4*talontest.BlockSize + 100
	old := talontest.WriteBlob(t, blobs, "doc.bin", size, 21)
	c := talontest.StartCluster(t, blobs, 3)
	get := func(t *testing.T, extra ...string) []byte {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		res := talontest.RunTalon(t, nil, append([]string{"get", "doc.bin", "-o", out, "--coordinators", c.Ctl, "--block-size", "1MiB", "--insecure-control-plane"}, extra...)...)
		if res.Code != 0 {
			t.Fatalf("get: exit %d\n%s", res.Code, res.Stderr)
		}
		got, _ := os.ReadFile(out)
		return got
	}
	if got := get(t); !bytes.Equal(got, old) {
		t.Fatal("first get: wrong bytes")
	}
	// Rewrite in place: same file, same size, new bytes.
	path := filepath.Join(blobs, "doc.bin")
	fresh := bytes.Clone(old)
	for i := range fresh {
		fresh[i] ^= 0x5a
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(fresh, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, time.Now(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := get(t); !bytes.Equal(got, fresh) {
		t.Fatalf("get after a same-size in-place rewrite: new bytes %t, old bytes %t", bytes.Equal(got, fresh), bytes.Equal(got, old))
	}
	if got := get(t, "--source", "file://"+blobs); !bytes.Equal(got, fresh) {
		t.Fatal("get --source after the rewrite: wrong bytes")
	}
}

// TestNonOwnerCachesNothing is the review's attack: a client made a worker
// load blocks it does not own into its cache through /v1/digests/... or
// /v1/objects/...?replicas=16 (the ownership check used the client's
// replica count). Now a worker admits only blocks it owns under the
// cluster's placement-replicas.
func TestNonOwnerCachesNothing(t *testing.T) {
	talontest.SkipShort(t)
	blobs := t.TempDir()
	const nblocks = 12
	talontest.WriteBlob(t, blobs, "fill.bin", nblocks*talontest.BlockSize, 31)
	c := talontest.StartCluster(t, blobs, 3) // placement-replicas 2: each block has one non-owner
	ctx := context.Background()
	byNode := map[string]string{}
	nonOwned := map[string][]int64{}
	for b := range int64(nblocks) {
		pl, err := c.Coord.API(t).Placement(ctx, datav1.BlockKey("fill.bin", b), 3)
		if err != nil || len(pl.Owners) != 3 {
			t.Fatalf("placement of block %d: %v", b, err)
		}
		third := pl.Owners[2]
		byNode[third.NodeID] = third.Address
		nonOwned[third.NodeID] = append(nonOwned[third.NodeID], b)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	for node, blocks := range nonOwned {
		for _, b := range blocks {
			req := datav1.Request{Addr: byNode[node], Object: "fill.bin", Offset: b * talontest.BlockSize, Length: talontest.BlockSize, Replicas: datav1.MaxReplicas}
			if _, err := datav1.Fetch(ctx, hc, req); err == nil {
				t.Errorf("%s served block %d it does not own (replicas=16 in the request)", node, b)
			}
			_, _ = datav1.FetchDigest(ctx, hc, req)
		}
	}
	for node := range nonOwned {
		if n := talontest.ScrapeGauge(t, c.Workers[node], "talon_worker_cache_blocks"); n != 0 {
			t.Errorf("%s caches %v blocks after requests for blocks it does not own; want 0", node, n)
		}
		body := talontest.ScrapeText(t, c.Workers[node])
		if !strings.Contains(body, `operation="digest",outcome="uncached"`) {
			t.Errorf("%s does not count uncached digests:\n%s", node, talontest.GrepLines(body, "talon_requests_total"))
		}
	}
}
