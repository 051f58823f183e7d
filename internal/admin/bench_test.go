package admin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// benchEnv runs a coordinator holding n workers.
func benchEnv(b *testing.B, n int) *env {
	b.Helper()
	e := startCoordinator(b, envOptions{admin: exposeAll()})
	for i := range n {
		e.put(b, workerRecord(fmt.Sprintf("w%05d", i), map[string]string{"zone": fmt.Sprint("z", i%3)}), time.Hour)
	}
	return e
}

// benchGet measures the handler alone (no network): the View read of the
// memory store, conversion and JSON encoding.
func benchGet(b *testing.B, e *env, path string) {
	b.Helper()
	h := e.srv.Handler()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/response")
}

func BenchmarkNodes(b *testing.B) {
	e := benchEnv(b, 1000)
	b.Run("page=100", func(b *testing.B) { benchGet(b, e, "/api/v1/nodes") })
	b.Run("page=1000", func(b *testing.B) { benchGet(b, e, "/api/v1/nodes?limit=1000") })
	b.Run("filtered", func(b *testing.B) { benchGet(b, e, "/api/v1/nodes?label=zone%3Dz1&limit=1000") })
}

func BenchmarkPlacement(b *testing.B) {
	e := benchEnv(b, 1000)
	benchGet(b, e, "/api/v1/placement?key=bucket%2Fobject%230&replicas=3")
}

func BenchmarkCluster(b *testing.B) {
	e := benchEnv(b, 1000)
	benchGet(b, e, "/api/v1/cluster")
}

// BenchmarkView is the floor under every coordinator resource: one
// batched snapshot read of the memory store and its placement table.
func BenchmarkView(b *testing.B) {
	e := benchEnv(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.coord.View(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
