package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/protocol"
)

// worker is a fake data server: it serves body (nil: answers status) for
// reads and digests, naming version.
func worker(t *testing.T, body []byte, status int, version string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body == nil {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"error":{"code":"x","message":"refused"}}`)
			return
		}
		off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		n, _ := strconv.ParseInt(r.URL.Query().Get("length"), 10, 64)
		end := min(off+n, int64(len(body)))
		w.Header().Set(datav1.ObjectSizeHeader, strconv.Itoa(len(body)))
		w.Header().Set(datav1.ObjectVersionHeader, version)
		if key, ok := strings.CutPrefix(r.URL.Path, datav1.DigestPrefix); ok {
			sum := sha256.Sum256(body[off:end])
			_ = json.NewEncoder(w).Encode(datav1.Digest{Object: key, Offset: off, Length: end - off, ObjectSize: int64(len(body)), SHA256: hex.EncodeToString(sum[:]), Version: version})
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(end-off, 10))
		_, _ = w.Write(body[off:end])
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// memStore is a Versioned blob store of one object with a SHA-256.
type memStore struct {
	data    []byte
	version string
	sum     []byte // nil: no checksum
}

func (s *memStore) Size(ctx context.Context, o string) (int64, error) { return int64(len(s.data)), nil }
func (s *memStore) ReadRange(ctx context.Context, o string, off, n int64) (io.ReadCloser, error) {
	return s.ReadVersion(ctx, o, "", off, n)
}
func (s *memStore) Stat(ctx context.Context, o string) (blob.Info, error) {
	info := blob.Info{Size: int64(len(s.data)), Version: s.version}
	if s.sum != nil {
		info.Checksum = blob.Checksum{Algorithm: blob.SHA256, Value: s.sum}
	}
	return info, nil
}
func (s *memStore) ReadVersion(ctx context.Context, o, v string, off, n int64) (io.ReadCloser, error) {
	if v != "" && v != s.version {
		return nil, blob.ErrVersionChanged
	}
	end := min(off+n, int64(len(s.data)))
	return io.NopCloser(bytes.NewReader(s.data[min(off, end):end])), nil
}

// TestVerifyAndFallback: the reading rules of ObjectReader, each against
// fake workers placed in the order given (the first --replicas serve, all
// vouch).
func TestVerifyAndFallback(t *testing.T) {
	const bs = 1000
	right := bytes.Repeat([]byte("talon!"), 700) // 5 blocks
	wrong := bytes.Repeat([]byte{0xEE}, len(right))
	sum := sha256.Sum256(right)
	const v = "v1"
	type w struct {
		body   []byte
		status int
	}
	honest, liar := w{right, 0}, w{wrong, 0}
	tests := []struct {
		name     string
		workers  []w
		verify   bool
		source   *memStore
		want     error // nil: the right bytes
		stderrOK func(msgs []string) bool
	}{
		{"404 from the first owner", []w{{nil, 404}, honest}, false, nil, nil, nil},
		{"416 from the first owner", []w{{nil, 416}, honest}, false, nil, nil, nil},
		{"500 from the first owner", []w{{nil, 500}, honest}, false, nil, nil, nil},
		{"every owner 404", []w{{nil, 404}, {nil, 404}}, false, nil, datav1.ErrNotFound, nil},
		{"every owner fails, the store serves", []w{{nil, 500}, {nil, 404}}, false, &memStore{data: right, version: v}, nil, nil},
		{"honest majority", []w{honest, honest, honest}, true, nil, nil, nil},
		{"two of three collude, no store", []w{liar, liar, honest}, true, nil, client.ErrVerification, func(m []string) bool {
			return len(m) > 0 && !strings.Contains(strings.Join(m, "\n"), "contradict")
		}},
		{"two of three collude, store settles", []w{liar, liar, honest}, true, &memStore{data: right, version: v, sum: sum[:]}, nil, func(m []string) bool {
			j := strings.Join(m, "\n")
			return strings.Contains(j, "contradict workers w0, w1 ") && !strings.Contains(j, "w2 (")
		}},
		{"everyone colludes, store checksum catches it", []w{liar, liar, liar}, true, &memStore{data: right, version: v, sum: sum[:]}, client.ErrChecksum, nil},
		{"one worker cannot vouch for itself", []w{honest}, true, nil, client.ErrVerification, nil},
	}
	// Every rule holds whether the blocks are read one run at a time or
	// several at once (Parallel), and the bytes come out in order.
	for _, par := range []int{0, 3} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/parallel=%d", tt.name, par), func(t *testing.T) {
				var owners []protocol.Owner
				for i, wk := range tt.workers {
					owners = append(owners, protocol.Owner{NodeID: "w" + strconv.Itoa(i), DataAddress: worker(t, wk.body, wk.status, v)})
				}
				fake := startFake(t, func(req protocol.Message) protocol.Message {
					if l, ok := req.(*protocol.PlacementLookup); ok {
						return &protocol.PlacementResponse{Version: 0x5eed, Owners: owners[:min(len(owners), int(l.Replicas))]}
					}
					return &protocol.Pong{}
				})
				c, err := client.New(client.Options{Coordinators: []string{fake.addr}, CacheTTL: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var mu sync.Mutex // with Parallel, reports come from several goroutines
				var msgs []string
				r := &client.ObjectReader{Client: c, HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: bs, Replicas: 2, Verify: tt.verify, Parallel: par,
					OnVerifyFailure: func(_ string, _ int64, m string) { mu.Lock(); msgs = append(msgs, m); mu.Unlock() }}
				if tt.source != nil {
					r.Source = tt.source
				}
				var out bytes.Buffer
				_, err = r.ReadObject(context.Background(), "obj", &out)
				switch {
				case tt.want == nil && (err != nil || !bytes.Equal(out.Bytes(), right)):
					t.Fatalf("ReadObject = %v, right bytes %t", err, bytes.Equal(out.Bytes(), right))
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Fatalf("ReadObject = %v, want %v", err, tt.want)
				case tt.stderrOK != nil && !tt.stderrOK(msgs):
					t.Fatalf("reports:\n%s", strings.Join(msgs, "\n"))
				}
			})
		}
	}
}
