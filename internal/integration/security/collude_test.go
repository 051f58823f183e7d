package security

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// colluder is a compromised worker that colludes with the others started
// by this function: it holds a valid worker credential, keeps its record
// alive, reads the object's real version from the store (it has the
// store's credentials like any worker) and echoes it, and answers every
// read with the same wrong bytes as every other colluder, and every digest
// with the digest of those bytes. Colluders therefore vouch for each
// other.
func colluder(t *testing.T, p *talontest.PKI, ctl, node, blobs string) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, digest := strings.CutPrefix(r.URL.Path, datav1.DigestPrefix)
		if !digest {
			key = strings.TrimPrefix(r.URL.Path, datav1.PathPrefix)
		}
		fi, err := os.Stat(filepath.Join(blobs, filepath.FromSlash(key)))
		if err != nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		size := fi.Size()
		serveForged(w, r, key, digest, size, "f"+strconv.FormatInt(size, 10)+"-"+strconv.FormatInt(fi.ModTime().UnixNano(), 10), 0xC0)
	})
	rogueWorker(t, p, ctl, node, h)
}

// queryInt is r's integer query parameter name, def when absent or bad.
func queryInt(r *http.Request, name string, def int64) int64 {
	v, err := strconv.ParseInt(r.URL.Query().Get(name), 10, 64)
	if err != nil {
		return def
	}
	return v
}

// serveForged answers a data request of object key, a block or (digest)
// its digest, with bytes of fill from the requested offset, claiming size
// and version: a worker whose bytes and digests lie consistently.
func serveForged(w http.ResponseWriter, r *http.Request, key string, digest bool, size int64, version string, fill byte) {
	off, length := queryInt(r, "offset", 0), queryInt(r, "length", talontest.BlockSize)
	body := bytes.Repeat([]byte{fill}, int(max(min(length, size-off), 0)))
	w.Header().Set(datav1.ObjectSizeHeader, strconv.FormatInt(size, 10))
	w.Header().Set(datav1.ObjectVersionHeader, version)
	if digest {
		sum := sha256.Sum256(body)
		_ = json.NewEncoder(w).Encode(datav1.Digest{Object: key, Offset: off, Length: int64(len(body)), ObjectSize: size, SHA256: hex.EncodeToString(sum[:]), Version: version})
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// rogueWorker registers node as a worker with a valid credential, keeps
// its record alive, and serves its data port with h.
func rogueWorker(t *testing.T, p *talontest.PKI, ctl, node string, h http.Handler) {
	t.Helper()
	src := p.Source(t, pki.RoleWorker, node)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", src.ServerConfig(pki.Expect{}))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h}
	go func() { _ = srv.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; srv.Close() })

	cn := p.DialAs(t, ctl, pki.RoleWorker, node)
	rec := &cluster.Record{FeatureLevel: cluster.BuildLevel, ClusterID: "it", NodeID: node, Role: cluster.RoleWorker, IncarnationID: node + "-1",
		Address: ln.Addr().String(), Version: "rogue", StartTimeUnixMs: time.Now().UnixMilli(), Health: cluster.HealthHealthy, Ready: true}
	msg, err := protocol.NewRegister(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cn.Call(ctx, msg); err != nil {
		t.Fatalf("%s registration: %v", node, err)
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rec.HeartbeatSeq++
			if m, err := protocol.NewHeartbeat(rec); err == nil {
				_, _ = cn.Call(ctx, m)
			}
		}
	}()
}

// contradicted returns the workers get's stderr names as contradicted by
// the store, and whether it named anyone as a liar in any other way.
var contradictedRE = regexp.MustCompile(`contradict workers ([^ ]+(?:, [^ ]+)*) \(`)

func contradicted(stderr string) map[string]bool {
	out := map[string]bool{}
	for _, m := range contradictedRE.FindAllStringSubmatch(stderr, -1) {
		for n := range strings.SplitSeq(m[1], ", ") {
			out[n] = true
		}
	}
	return out
}

// TestColludingWorkersNeverYieldWrongBytes is the review's attack: workers
// with valid credentials that serve the same wrong bytes and vouch for
// each other's digests. With two of three and then three of four workers
// colluding, `talon get` never exits 0 with wrong bytes and never names an
// honest worker as the liar; with --source it writes the right bytes and
// names only colluders. (Before this change, 2 of 3 colluders made get
// exit 0 with all blocks wrong, blaming the honest worker.)
func TestColludingWorkersNeverYieldWrongBytes(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	blobs := t.TempDir()
	const size = 10*talontest.BlockSize + 5
	want := talontest.WriteBlob(t, blobs, "big.bin", size, 11)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	honestProc := talontest.Start(t, "honest-1", talontest.WorkerArgs("honest-1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), p.Args(t, pki.RoleWorker, "honest-1")...)...)
	colluder(t, p, ctl, "bad-1", blobs)
	colluder(t, p, ctl, "bad-2", blobs)
	f := p.Files(t, pki.RoleClient, "reader")
	creds := []string{"--coordinators", ctl, "--block-size", "1MiB", "--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile, "--timeout", "50s"}
	dir := t.TempDir()
	honest := map[string]bool{"honest-1": true}
	check := func(t *testing.T, name string, withSource bool) {
		out := filepath.Join(dir, name)
		args := append([]string{"get", "big.bin", "-o", out}, creds...)
		if withSource {
			args = append(args, "--source", "file://"+blobs)
		}
		res := talontest.RunTalon(t, nil, args...)
		got, _ := os.ReadFile(out)
		right := bytes.Equal(got, want)
		if res.Code == 0 && !right {
			t.Fatalf("talon get exit 0 with wrong bytes:\n%s", res.Stderr)
		}
		for n := range contradicted(res.Stderr) {
			if honest[n] {
				t.Fatalf("talon get named honest worker %s as contradicted by the store:\n%s", n, res.Stderr)
			}
		}
		if withSource && (res.Code != 0 || !right) {
			t.Fatalf("with --source: exit %d, right bytes %t; want the right object\n%s", res.Code, right, res.Stderr)
		}
		if withSource && len(contradicted(res.Stderr)) == 0 {
			t.Fatalf("with --source, no colluder named:\n%s", res.Stderr)
		}
		if !withSource && res.Code != 0 && !strings.Contains(res.Stderr, "workers disagree") {
			t.Fatalf("without --source: exit %d without reporting the disagreement:\n%s", res.Code, res.Stderr)
		}
		t.Logf("exit %d, right bytes %t\n%s", res.Code, right, talontest.Tail(res.Stderr, 1500))
	}
	waitWorkers := func(n int) {
		testsupport.WaitFor(t, 30*time.Second, fmt.Sprintf("%d eligible workers", n), func() bool {
			cl, err := coord.API(t).Cluster(context.Background())
			return err == nil && cl.EligibleWorkers == n
		})
	}
	waitWorkers(3)
	t.Run("two of three", func(t *testing.T) { check(t, "2of3", false) })
	t.Run("two of three with source", func(t *testing.T) { check(t, "2of3s", true) })
	// Issue 40: the honest worker out of placement, so the two colluders
	// are every worker placement names and vouch for each other; the
	// file:// store keeps no checksum of the object. Before, get --source
	// exited 0 with every block wrong.
	honestProc.Kill()
	waitWorkers(2)
	t.Run("two colluders alone with source", func(t *testing.T) { check(t, "2alones", true) })
	honestProc.Restart()
	waitWorkers(3)
	colluder(t, p, ctl, "bad-3", blobs)
	waitWorkers(4)
	t.Run("three of four", func(t *testing.T) { check(t, "3of4", false) })
	t.Run("three of four with source", func(t *testing.T) { check(t, "3of4s", true) })
}
