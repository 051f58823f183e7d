package client_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport"
)

// worker is a fake data server: it serves body (nil: answers status) for
// reads and digests, naming version.
func worker(t *testing.T, body []byte, status int, version string) string {
	t.Helper()
	if status < 0 { // silent: nothing listens at the address any more
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return ln.Addr().String()
	}
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

// memStore is a Versioned blob store of one object with a SHA-256 (or
// alg) checksum. reads counts its ReadVersion calls.
type memStore struct {
	data    []byte
	version string
	sum     []byte // nil: no checksum
	alg     string // "": blob.SHA256
	reads   atomic.Int64
}

func (s *memStore) Size(ctx context.Context, o string) (int64, error) { return int64(len(s.data)), nil }
func (s *memStore) ReadRange(ctx context.Context, o string, off, n int64) (io.ReadCloser, error) {
	return s.ReadVersion(ctx, o, "", off, n)
}
func (s *memStore) Stat(ctx context.Context, o string) (blob.Info, error) {
	info := blob.Info{Size: int64(len(s.data)), Version: s.version}
	if s.sum != nil {
		info.Checksum = blob.Checksum{Algorithm: cmp.Or(s.alg, blob.SHA256), Value: s.sum}
	}
	return info, nil
}
func (s *memStore) ReadVersion(ctx context.Context, o, v string, off, n int64) (io.ReadCloser, error) {
	s.reads.Add(1)
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
	honest, liar, silent := w{right, 0}, w{wrong, 0}, w{nil, -1}
	forger := w{testsupport.ForgeCRC64NVME(right, 1500, 2000), 0} // block 1 forged, block 2 "corrected"
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
		// Issue 47: an owner that does not answer is no consent, however
		// many of the others vouch; the silent owner is named.
		{"two of three collude, the honest one silent, no store", []w{liar, liar, silent}, true, nil, client.ErrVerification, func(m []string) bool {
			return strings.Contains(strings.Join(m, "\n"), "owners w2 did not answer")
		}},
		{"honest primary silent, two colluders vouch, no store", []w{silent, liar, liar}, true, nil, client.ErrVerification, nil},
		// An owner whose store fails for it (502) or says not found (404)
		// answered: it does not vouch, but it is not silent, so a block the
		// others hold stays readable while the store is down.
		{"one owner's store fails, two vouch", []w{honest, {nil, 502}, honest}, true, nil, nil, nil},
		{"one owner answers not found, two vouch", []w{honest, {nil, 404}, honest}, true, nil, nil, nil},
		{"one owner's store fails, one vouches", []w{honest, {nil, 502}}, true, nil, client.ErrVerification, nil},
		{"two of three collude, the honest one silent, store", []w{liar, liar, silent}, true, &memStore{data: right, version: v, sum: sum[:]}, nil, func(m []string) bool {
			return strings.Contains(strings.Join(m, "\n"), "owners w2 did not answer")
		}},
		{"two of three collude, the honest one silent, store without checksum", []w{liar, liar, silent}, true, &memStore{data: right, version: v}, nil, nil},
		{"two honest, one silent, no store", []w{honest, honest, silent}, true, nil, client.ErrVerification, nil},
		// A CRC is no evidence against tampering: every block is
		// compared with the store's bytes, which win.
		{"everyone colludes, store keeps a CRC only", []w{forger, forger, forger}, true, &memStore{data: right, version: v, sum: crc64nvme(right), alg: blob.CRC64NVME}, nil, func(m []string) bool {
			return strings.Contains(strings.Join(m, "\n"), "the store's bytes contradict workers w0")
		}},
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
				c := placingOn(t, owners)
				var mu sync.Mutex // with Parallel, reports come from several goroutines
				var msgs []string
				r := &client.ObjectReader{Client: c, HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: bs, Replicas: 2, Verify: tt.verify, Parallel: par,
					OnVerifyFailure: func(_ string, _ int64, m string) { mu.Lock(); msgs = append(msgs, m); mu.Unlock() }}
				if tt.source != nil {
					r.Source = tt.source
				}
				var out bytes.Buffer
				_, err := r.ReadObject(context.Background(), "obj", &out)
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

// crc64nvme is the store's CRC-64/NVME of b, as S3 sends it.
func crc64nvme(b []byte) []byte {
	h := blob.Checksum{Algorithm: blob.CRC64NVME}.NewHash()
	h.Write(b)
	return h.Sum(nil)
}

// TestCRCIsNoEvidence: with a store that keeps only a CRC of the object,
// workers that all serve the same forged bytes (whose CRC the attacker
// made equal to the store's: here the store's CRC is simply of the
// forged bytes) are caught block by block; with a cryptographic checksum
// the whole object is checked once and no block is read from the store.
func TestCRCIsNoEvidence(t *testing.T) {
	const bs = 1000
	right := bytes.Repeat([]byte("talon!"), 700)
	forged := testsupport.ForgeCRC64NVME(right, 1500, 2000)
	sum := sha256.Sum256(right)
	for _, tt := range []struct {
		name        string
		store       *memStore
		serve       []byte
		wantCompare bool
		describe    string
	}{
		{"crc64nvme, forged bytes of the same crc", &memStore{data: right, version: "v1", sum: crc64nvme(right), alg: blob.CRC64NVME}, forged, true, "detects corruption, not tampering"},
		{"crc64nvme, honest workers", &memStore{data: right, version: "v1", sum: crc64nvme(right), alg: blob.CRC64NVME}, right, true, "5 of 5 blocks compared with the store's bytes"},
		{"sha256", &memStore{data: right, version: "v1", sum: sum[:]}, right, false, "evidence: a cryptographic checksum"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var owners []protocol.Owner
			for i := range 3 {
				owners = append(owners, protocol.Owner{NodeID: "w" + strconv.Itoa(i), DataAddress: worker(t, tt.serve, 0, "v1")})
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
			r := &client.ObjectReader{Client: c, HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: bs, Replicas: 2, Verify: true, Source: tt.store}
			var out bytes.Buffer
			res, err := r.Read(context.Background(), "obj", &out)
			if err != nil || !bytes.Equal(out.Bytes(), right) {
				t.Fatalf("Read = %v, right bytes %t", err, bytes.Equal(out.Bytes(), right))
			}
			if compared := res.CheckedAgainstSource == res.Blocks && tt.store.reads.Load() >= res.Blocks; compared != tt.wantCompare {
				t.Fatalf("every block compared with the store: %t (%d of %d, %d store reads), want %t", compared, res.CheckedAgainstSource, res.Blocks, tt.store.reads.Load(), tt.wantCompare)
			}
			if d := res.Describe(true, true); !strings.Contains(d, tt.describe) {
				t.Fatalf("Describe = %q, want it to say %q", d, tt.describe)
			}
		})
	}
}

// TestUnversionedUnverifiedReadRefused: an object of several blocks whose
// store names no version is not read unverified (issue 47: blocks of two
// contents could be joined); one block, or a verified read, is.
func TestUnversionedUnverifiedReadRefused(t *testing.T) {
	const bs = 1000
	multi := bytes.Repeat([]byte("talon!"), 700) // 5 blocks
	for _, tc := range []struct {
		name    string
		body    []byte
		version string
		verify  bool
		want    error
	}{
		{"several blocks, no version, unverified", multi, "", false, client.ErrUnversioned},
		{"several blocks, no version, verified", multi, "", true, nil},
		{"several blocks, a version, unverified", multi, "v1", false, nil},
		{"one block, no version, unverified", multi[:bs], "", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owners := []protocol.Owner{{NodeID: "w0", DataAddress: worker(t, tc.body, 0, tc.version)}, {NodeID: "w1", DataAddress: worker(t, tc.body, 0, tc.version)}}
			r := &client.ObjectReader{Client: placingOn(t, owners), HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: bs, Replicas: 2, Verify: tc.verify}
			var out bytes.Buffer
			_, err := r.ReadObject(context.Background(), "obj", &out)
			switch {
			case tc.want == nil && (err != nil || !bytes.Equal(out.Bytes(), tc.body)):
				t.Fatalf("ReadObject = %v, right bytes %t", err, bytes.Equal(out.Bytes(), tc.body))
			case tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), "ETag or Last-Modified")):
				t.Fatalf("ReadObject = %v, want %v naming why", err, tc.want)
			}
		})
	}
}

// placingOn returns a client of a fake coordinator whose placement names
// owners (as many as a lookup asks for), closed when the test ends.
func placingOn(t *testing.T, owners []protocol.Owner) *client.Client {
	t.Helper()
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
	t.Cleanup(func() { c.Close() })
	return c
}
