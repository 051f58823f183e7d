package dataserver_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/worker/dataserver"
)

// TestClientCannotFillAnotherWorkersCache is the review's attack: a client
// asking a worker for blocks it does not own, with any replica count or
// through digests, gets nothing into that worker's cache. Ownership is the
// worker's (placement-replicas), never the request's replicas; digests of
// blocks the worker does not own are read from the store uncached, counted
// ("digest"/"uncached") and limited per client.
func TestClientCannotFillAnotherWorkersCache(t *testing.T) {
	// No warm-up bound: it would pace the digests below the per-client
	// limit this test is about (TestWarmupBoundsDigests).
	e := newEnvWith(t, bs, 64*bs, nil, func(c *dataserver.Config) { c.WarmupRate = -1 })
	data := pattern(1, 8*bs)
	e.put(t, "obj", data)
	for b := range int64(8) {
		e.own.notOwned[b] = true
	}
	ctx := context.Background()
	_, err := datav1.Fetch(ctx, e.client, datav1.Request{Addr: e.addr, Object: "obj", Offset: 0, Length: bs, Replicas: datav1.MaxReplicas})
	if !errors.Is(err, datav1.ErrWrongOwner) {
		t.Fatalf("read of a block the worker does not own with replicas=16 = %v, want wrong_owner", err)
	}
	var limited error
	served := 0
	for i := range 400 {
		d, err := datav1.FetchDigest(ctx, e.client, datav1.Request{Addr: e.addr, Object: "obj", Offset: int64(i%8) * bs, Length: bs, Replicas: datav1.MaxReplicas})
		if err != nil {
			limited = err
			break
		}
		served++
		if d.Length != bs {
			t.Fatalf("digest length %d", d.Length)
		}
	}
	if capy, _ := e.st.Status(); capy.Blocks != 0 || capy.ResidentBytes != 0 {
		t.Fatalf("after %d digests and a read of blocks it does not own, the worker caches %d blocks (%d bytes); want none", served, capy.Blocks, capy.ResidentBytes)
	}
	if !errors.Is(limited, datav1.ErrRateLimited) || served < 2 || served >= 400 {
		t.Fatalf("%d unowned digests served, then %v; want the per-client limit to refuse some with rate_limited", served, limited)
	}
	e.settle(t, int64(served)+2)
	if n := e.observedCount("digest/uncached"); n != int64(served) {
		t.Fatalf("digest/uncached counted %d, want %d", n, served)
	}
	if n := e.observedCount("digest/" + datav1.CodeRateLimited); n != 1 {
		t.Fatalf("digest/rate_limited counted %d, want 1", n)
	}
	// An owned block's digest goes through the cache.
	e.own.mu.Lock()
	delete(e.own.notOwned, 3)
	e.own.mu.Unlock()
	if _, err := datav1.FetchDigest(ctx, e.client, datav1.Request{Addr: e.addr, Object: "obj", Offset: 3 * bs, Length: bs}); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, e.st) // the digest may stream before the block is committed
	if capy, _ := e.st.Status(); capy.Blocks != 1 {
		t.Fatalf("an owned block's digest cached %d blocks, want 1", capy.Blocks)
	}
}

// TestObjectVersions: answers carry the object's version; a request for
// another version is refused with version_changed (and the current one);
// fresh revalidates, so a same-size rewrite is seen at once.
func TestObjectVersions(t *testing.T) {
	e := newEnv(t, bs, 64*bs)
	old := pattern(1, 2*bs)
	e.put(t, "obj", old)
	ctx := context.Background()
	req := datav1.Request{Addr: e.addr, Object: "obj", Offset: 0, Length: bs}
	res, err := datav1.Fetch(ctx, e.client, req)
	if err != nil || res.ObjectVersion == "" || string(res.Data) != string(old[:bs]) {
		t.Fatalf("Fetch = %+v, %v; want the bytes and a version", res, err)
	}
	v1 := res.ObjectVersion
	changed := pattern(2, 2*bs)
	e.put(t, "obj", changed)
	p := filepath.Join(e.blobDir, "obj")
	if err := os.Chtimes(p, time.Now(), time.Now().Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Within the size TTL a read pinned to v1 may still get v1's bytes
	// (consistent: they are v1's). Once the worker has seen the rewrite
	// (here through a fresh read), a read pinned to v1 is refused, never
	// answered with the new bytes under the old name.
	if res, err := datav1.Fetch(ctx, e.client, datav1.Request{Addr: e.addr, Object: "obj", Offset: bs, Length: bs, Fresh: true}); err != nil || res.ObjectVersion == v1 {
		t.Fatalf("fresh Fetch after a rewrite = %+v, %v; want a new version", res, err)
	}
	req.ObjectVersion = v1
	_, err = datav1.Fetch(ctx, e.client, req)
	var de *datav1.Error
	if !errors.As(err, &de) || !errors.Is(err, datav1.ErrVersionChanged) || de.Status != http.StatusPreconditionFailed || de.ObjectVersion == v1 || de.ObjectVersion == "" {
		t.Fatalf("Fetch pinned to the old version = %v, want 412 version_changed naming the new version", err)
	}
	req.ObjectVersion = de.ObjectVersion
	res, err = datav1.Fetch(ctx, e.client, req)
	if err != nil || string(res.Data) != string(changed[:bs]) {
		t.Fatalf("Fetch of the new version = %v", err)
	}
	// fresh: a reader that does not know the version yet sees the current
	// one even within the worker's size TTL.
	e.put(t, "obj", old)
	if err := os.Chtimes(p, time.Now(), time.Now().Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err = datav1.Fetch(ctx, e.client, datav1.Request{Addr: e.addr, Object: "obj", Offset: bs, Length: bs, Fresh: true})
	if err != nil || string(res.Data) != string(old[bs:]) {
		t.Fatalf("fresh Fetch after a rewrite = %v, new bytes %t", err, err == nil && string(res.Data) == string(old[bs:]))
	}
	for _, q := range []string{"version=", "fresh=2", "version=a&version=b"} {
		resp, err := e.client.Get(e.srv.URL + "/v1/objects/obj?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: status %d, want 400", q, resp.StatusCode)
		}
	}
}
