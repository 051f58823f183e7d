package cache

import (
	"bytes"
	"testing"
)

// FuzzDecodeHeader feeds arbitrary bytes (a damaged block file) to the
// header decoder: it must never panic, and whatever it accepts must
// re-encode to the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	good := (&header{key: "dir/obj", blockSize: 4096, index: 3, objSize: 20000, dataLen: 3616, sum: 42}).encode()
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add((&header{key: "a/b", version: `etag:"9b2cf535f27731c974343645a3985328"`, blockSize: 4096, index: 0, objSize: 10, dataLen: 10, sum: 7}).encode())
	f.Add([]byte("TALONBLK"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			return
		}
		enc := h.encode()
		if !bytes.Equal(enc, b[:len(enc)]) {
			t.Fatalf("decoded %+v re-encodes differently", h)
		}
	})
}
