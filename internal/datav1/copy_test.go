package datav1

import (
	"bytes"
	"runtime"
	"testing"
)

// discard has no ReadFrom, as the writers copyBody copies through a
// buffer for.
type discard struct{ n int64 }

func (d *discard) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

// TestCopyBodyReusesItsBuffer checks that copies through a caller's
// buffer allocate none of their own: 50 copies of a 1 MiB body allocate
// less than one buffer's worth in all.
func TestCopyBodyReusesItsBuffer(t *testing.T) {
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i)
	}
	r := bytes.NewReader(body)
	scratch := make([]byte, CopyBufferSize)
	var w discard
	copyOnce := func() {
		r.Reset(body)
		n, err := copyBody(&w, r, int64(len(body)), scratch)
		if err != nil || n != int64(len(body)) {
			t.Fatalf("copyBody = %d, %v; want %d bytes", n, err, len(body))
		}
	}
	copyOnce()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 50 {
		copyOnce()
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got >= CopyBufferSize {
		t.Fatalf("50 copies allocated %d bytes, want less than %d (the caller's buffer reused)", got, CopyBufferSize)
	}
	if w.n != 51*int64(len(body)) {
		t.Fatalf("copied %d bytes, want %d", w.n, 51*len(body))
	}
}
