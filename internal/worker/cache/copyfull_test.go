package cache

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// writeSizes records the size of every Write.
type writeSizes struct {
	bytes.Buffer
	sizes []int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.Buffer.Write(p)
}

// TestCopyFullWritesWholeBuffers checks that a load writes a block file in
// whole buffers however little each read of the source returns (the page
// cache's folios, which hits are served from, follow the writes), and
// that it copies what io.CopyN would.
func TestCopyFullWritesWholeBuffers(t *testing.T) {
	data := make([]byte, 10<<10+123)
	for i := range data {
		data[i] = byte(i * 31)
	}
	for _, tc := range []struct {
		name    string
		n       int64
		src     io.Reader
		want    []int
		wantErr error
	}{
		{"one byte per read", int64(len(data)), iotest.OneByteReader(bytes.NewReader(data)), []int{4096, 4096, 2048 + 123}, nil},
		{"half reads", int64(len(data)), iotest.HalfReader(bytes.NewReader(data)), []int{4096, 4096, 2048 + 123}, nil},
		{"n below the data", 5000, iotest.OneByteReader(bytes.NewReader(data)), []int{4096, 904}, nil},
		{"source ends early", int64(len(data)) + 10, bytes.NewReader(data), []int{4096, 4096, 2048 + 123}, io.EOF},
		{"source fails", int64(len(data)), iotest.TimeoutReader(bytes.NewReader(data)), []int{4096}, iotest.ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w writeSizes
			got, err := copyFull(&w, tc.src, tc.n, make([]byte, 4096))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("copyFull error = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(w.sizes, tc.want) {
				t.Fatalf("writes of %v bytes, want %v", w.sizes, tc.want)
			}
			want := data[:min(int(tc.n), len(data))]
			if tc.wantErr == iotest.ErrTimeout {
				want = data[:4096]
			}
			if got != int64(len(want)) || !bytes.Equal(w.Bytes(), want) {
				t.Fatalf("copied %d bytes (%d written), want the first %d of the data", got, w.Len(), len(want))
			}
		})
	}
}
