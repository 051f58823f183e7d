package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

func forgedRecord(node, incarnation, addr string) []byte {
	b, err := cluster.Encode(&cluster.Record{FeatureLevel: cluster.BuildLevel,
		ClusterID: "it", NodeID: node, Role: cluster.RoleWorker, IncarnationID: incarnation, Address: addr,
		Version: "evil", HeartbeatSeq: 1, Health: cluster.HealthHealthy, Ready: true,
		StartTimeUnixMs: time.Now().Add(time.Hour).UnixMilli(),
	})
	if err != nil {
		panic(err)
	}
	return b
}

func wantCode(t *testing.T, what string, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code || pe.Retryable {
		t.Fatalf("%s: got %v, want non-retryable %s", what, err, code)
	}
}

func workerRecordOf(t *testing.T, coord *talontest.Proc, node string) *apiv1.Node {
	t.Helper()
	n, err := coord.API(t).Node(context.Background(), node)
	if err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
	return &n.Node
}

// TestControlPlaneAttacksRefused reproduces the review's attacks against
// real processes on the memory and etcd backends with mutual TLS on: each
// is refused and nothing is stored. (On the old code a heartbeat for
// another worker's node ID replaced its record.)
func TestControlPlaneAttacksRefused(t *testing.T) {
	talontest.SkipShort(t)
	backends := map[string]func(t *testing.T) []string{
		"memory": func(*testing.T) []string { return nil },
		"etcd": func(t *testing.T) []string {
			e := testenv.StartEtcd(t, testenv.EtcdOptions{})
			return []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ",")}
		},
	}
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			p := talontest.NewPKI(t)
			ctl := talontest.FreeAddr(t)
			extra := append(backend(t), p.Args(t, pki.RoleCoordinator, "coord")...)
			extra = append(extra, "--frame-timeout", "1s", "--idle-timeout", "3s")
			coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), extra...)...)
			testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
			blobs := t.TempDir()
			w1 := talontest.Start(t, "worker-1", talontest.WorkerArgs("worker-1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(),
				append(p.Args(t, pki.RoleWorker, "worker-1"), "--frame-timeout", "1s")...)...)
			testsupport.WaitFor(t, 20*time.Second, "worker healthy", func() bool {
				cl, err := coord.API(t).Cluster(context.Background())
				return err == nil && cl.EligibleWorkers == 1
			})
			before := workerRecordOf(t, coord, "worker-1")
			ctx := context.Background()

			// A forged heartbeat and registration for worker-1 from another
			// worker's credential.
			evil := p.DialAs(t, ctl, pki.RoleWorker, "evil")
			_, err := evil.Call(ctx, &protocol.Heartbeat{Record: forgedRecord("worker-1", "forged", "127.0.0.1:6666")})
			wantCode(t, "forged heartbeat", err, protocol.CodePermissionDenied)
			_, err = evil.Call(ctx, &protocol.Register{Record: forgedRecord("worker-1", "forged", "127.0.0.1:6666")})
			wantCode(t, "forged registration", err, protocol.CodePermissionDenied)
			// A forged deregistration.
			_, err = evil.Call(ctx, &protocol.Deregister{ClusterID: "it", Role: cluster.RoleWorker, NodeID: "worker-1", IncarnationID: before.IncarnationID})
			wantCode(t, "forged deregistration", err, protocol.CodePermissionDenied)
			// A worker credential registering as a coordinator, and a client
			// credential registering at all.
			coordRec, _ := cluster.Encode(&cluster.Record{FeatureLevel: cluster.BuildLevel, ClusterID: "it", NodeID: "evil", Role: cluster.RoleCoordinator, IncarnationID: "x", Address: "127.0.0.1:1", Version: "evil", Health: cluster.HealthHealthy, Ready: true})
			_, err = evil.Call(ctx, &protocol.Register{Record: coordRec})
			wantCode(t, "worker credential registering a coordinator", err, protocol.CodePermissionDenied)
			reader := p.DialAs(t, ctl, pki.RoleClient, "reader")
			_, err = reader.Call(ctx, &protocol.Register{Record: forgedRecord("reader", "x", "127.0.0.1:7")})
			wantCode(t, "client credential registering", err, protocol.CodePermissionDenied)
			// The client role may read placement.
			if _, err := reader.Call(ctx, &protocol.PlacementLookup{Key: []byte("k#0"), Replicas: 1}); err != nil {
				t.Fatalf("client credential lookup: %v", err)
			}
			// 1,000 registrations of other nodes from one credential.
			for i := range 1000 {
				_, err := evil.Call(ctx, &protocol.Register{Record: forgedRecord(fmt.Sprintf("fake-%04d", i), "x", "127.0.0.1:7")})
				if i == 0 || i == 999 {
					wantCode(t, "fake registration", err, protocol.CodePermissionDenied)
				}
			}

			// Nothing was stored: worker-1's record is its own, and no other
			// worker exists.
			after := workerRecordOf(t, coord, "worker-1")
			if after.IncarnationID != before.IncarnationID || after.Address != before.Address {
				t.Fatalf("worker-1's record changed: %+v -> %+v", before, after)
			}
			list, err := coord.API(t).AllNodes(ctx, apiv1.NodeFilter{Role: "worker"})
			if err != nil || len(list.Items) != 1 {
				t.Fatalf("workers after the attacks: %v %v", list, err)
			}

			// No credential at all: plain TCP gets no answer, a TLS client
			// without a certificate fails the handshake.
			nc, err := net.Dial("tcp", ctl)
			if err != nil {
				t.Fatal(err)
			}
			plain := protocol.NewConn(nc, protocol.ConnOptions{})
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = plain.Call(pctx, &protocol.Ping{})
			cancel()
			plain.Close()
			if err == nil {
				t.Fatal("a ping without TLS was answered")
			}
			anon, err := tls.Dial("tcp", ctl, pki.Harden(&tls.Config{InsecureSkipVerify: true}))
			if err == nil {
				_, err = anon.Write(make([]byte, 24))
				if err == nil {
					_ = anon.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, err = anon.Read(make([]byte, 1))
				}
				anon.Close()
			}
			if err == nil {
				t.Fatal("a TLS client without a certificate was served")
			}

			// Certificates of another cluster from the same CA (a shared
			// issuer): a worker of cluster "other" named worker-1 cannot
			// register or heartbeat here, and a client of "other" reads
			// no data; nor can a certificate bound to no cluster.
			for _, addr := range []string{ctl, w1.Addr} { // the probe itself: this cluster's client is served
				if err := refusedAfterHandshake(addr, p.Source(t, pki.RoleClient, "reader").ClientConfig(pki.Expect{})); err != nil {
					t.Fatalf("a client of this cluster at %s: %v", addr, err)
				}
			}
			foreignPKI := func(cluster string) *talontest.PKI {
				dir := t.TempDir()
				if err := p.CA.Write(dir); err != nil {
					t.Fatal(err)
				}
				return &talontest.PKI{Dir: dir, CA: p.CA, Cluster: cluster}
			}
			for _, foreign := range []*talontest.PKI{foreignPKI("other"), foreignPKI("")} {
				for _, tc := range []struct {
					addr string
					role pki.Role
					node string
				}{{ctl, pki.RoleWorker, "worker-1"}, {w1.Addr, pki.RoleClient, "reader"}} {
					src := foreign.Source(t, tc.role, tc.node)
					want := pki.RoleCoordinator
					if tc.addr == w1.Addr {
						want = pki.RoleWorker
					}
					// The client side accepts any cluster here, so that
					// the server's refusal is what is tested.
					cfg := src.ClientConfig(pki.Expect{Roles: []pki.Role{want}})
					cfg.VerifyConnection = nil
					err := refusedAfterHandshake(tc.addr, cfg)
					if err == nil {
						t.Fatalf("%s/%s of cluster %q was served at %s", tc.role, tc.node, foreign.Cluster, tc.addr)
					}
				}
			}
			if after := workerRecordOf(t, coord, "worker-1"); after.IncarnationID != before.IncarnationID {
				t.Fatalf("worker-1's record changed after another cluster's certificate tried it: %+v", after)
			}

			// Slowloris: connections that never finish a handshake are
			// closed within the frame timeout, on the control port and on
			// the worker's data port.
			for _, addr := range []string{ctl, w1.Addr} {
				var conns []net.Conn
				for range 20 {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = c.Write([]byte{0x16, 0x03}) // half a TLS record header
					conns = append(conns, c)
				}
				for i, c := range conns {
					_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
					_, err := io.Copy(io.Discard, c)
					if err != nil {
						t.Fatalf("%s: stalled connection %d not closed within 10s: %v", addr, i, err)
					}
					c.Close()
				}
			}

			// Request ID 0 is refused (with a valid credential).
			raw := p.Source(t, pki.RoleWorker, "worker-2").ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
			tc, err := tls.Dial("tcp", ctl, raw)
			if err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			if err := protocol.NewEncoder(tc).Encode(0, &protocol.Ping{}); err != nil {
				t.Fatal(err)
			}
			_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
			f, err := protocol.NewDecoder(tc).ReadFrame()
			if err != nil {
				t.Fatalf("request ID 0: no answer: %v", err)
			}
			msg, err := f.Message()
			if e, ok := msg.(*protocol.Error); err != nil || !ok || e.Code != protocol.CodeInvalidArgument {
				t.Fatalf("request ID 0: answer %T %v %v", msg, msg, err)
			}

			// The real worker still heartbeats.
			// (Quiet heartbeats renew the record's lease without rewriting
			// it, so count what the worker saw accepted.)
			beats := talontest.AcceptedHeartbeats(w1)
			testsupport.WaitFor(t, 10*time.Second, "worker-1 heartbeating", func() bool {
				n := workerRecordOf(t, coord, "worker-1")
				return talontest.AcceptedHeartbeats(w1) > beats+2 && n.IncarnationID == before.IncarnationID && n.HeartbeatSeq >= after.HeartbeatSeq
			})
		})
	}
}

// TestRecordCapOverProtocol: without identities (insecure-control-plane),
// 1,000 fake registrations stop at max-records with resource_exhausted.
func TestRecordCapOverProtocol(t *testing.T) {
	talontest.SkipShort(t)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), "--max-records", "10")...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	nc, err := net.Dial("tcp", ctl)
	if err != nil {
		t.Fatal(err)
	}
	cn := protocol.NewConn(nc, protocol.ConnOptions{})
	defer cn.Close()
	refused := 0
	for i := range 1000 {
		_, err := cn.Call(context.Background(), &protocol.Register{Record: forgedRecord(fmt.Sprintf("fake-%04d", i), "x", "127.0.0.1:7")})
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code == protocol.CodeResourceExhausted {
			refused++
		} else if err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
	}
	list, err := coord.API(t).AllNodes(context.Background(), apiv1.NodeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) > 10 || refused < 990 {
		t.Fatalf("%d records stored, %d refused: want at most 10 stored", len(list.Items), refused)
	}
}

// TestCertificateRotation replaces every process's certificate files while
// reads flow: new connections use the new certificates, no process
// restarts, no read fails.
func TestCertificateRotation(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	blobs := t.TempDir()
	want := talontest.WriteBlob(t, blobs, "obj", 3*talontest.BlockSize+17, 7)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	var workers []*talontest.Proc
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("worker-%d", i)
		workers = append(workers, talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), p.Args(t, pki.RoleWorker, id)...)...))
	}
	testsupport.WaitFor(t, 20*time.Second, "workers healthy", func() bool {
		cl, err := coord.API(t).Cluster(context.Background())
		return err == nil && cl.EligibleWorkers == 3
	})
	creds := p.Source(t, pki.RoleClient, "reader")
	cl, err := client.New(client.Options{Coordinators: []string{ctl}, TLS: creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	serial := func(addr string) string {
		c, err := tls.Dial("tcp", addr, creds.ClientConfig(pki.Expect{}))
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	oldCoord, oldWorker := serial(ctl), serial(workers[0].Addr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readErr := make(chan error, 1)
	reads := 0
	go func() {
		var err error
		for ctx.Err() == nil && err == nil {
			// A fresh transport each read: every read makes new connections.
			tr := &http.Transport{TLSClientConfig: creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})}
			r := &client.ObjectReader{Client: cl, HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}, BlockSize: talontest.BlockSize, Replicas: 2, TLS: true, Verify: true}
			var buf bytes.Buffer
			if _, err = r.ReadObject(ctx, "obj", &buf); err == nil && !bytes.Equal(buf.Bytes(), want) {
				err = errors.New("read returned wrong bytes")
			}
			tr.CloseIdleConnections()
			if ctx.Err() != nil {
				err = nil
			}
			reads++
		}
		readErr <- err
	}()
	time.Sleep(500 * time.Millisecond)
	// Rotate: new certificates for every process, written in place.
	p.Files(t, pki.RoleCoordinator, "coord")
	for i := range workers {
		p.Files(t, pki.RoleWorker, fmt.Sprintf("worker-%d", i+1))
	}
	testsupport.WaitFor(t, 10*time.Second, "new certificates served", func() bool {
		return serial(ctl) != oldCoord && serial(workers[0].Addr) != oldWorker
	})
	time.Sleep(time.Second) // reads over the new certificates
	cancel()
	if err := <-readErr; err != nil {
		t.Fatalf("a read failed during rotation: %v", err)
	}
	for _, pr := range append([]*talontest.Proc{coord}, workers...) {
		if pr.Exited() {
			t.Fatalf("%s exited during rotation", pr.Name)
		}
	}
	if reads < 2 {
		t.Fatalf("only %d reads ran", reads)
	}
}

// TestDevDirCredentials: `talon get --dir` of a dev cluster reads with its
// client credential; without one it is refused with a usage error.
func TestTalonGetNeedsCredential(t *testing.T) {
	talontest.SkipShort(t)
	cmd := talontest.RunTalon(t, nil, "get", "--coordinators", "127.0.0.1:1", "x")
	if cmd.Code != 2 || !strings.Contains(cmd.Stderr, "--insecure-control-plane") {
		t.Fatalf("get without a credential: exit %d %s", cmd.Code, cmd.Stderr)
	}
	dir := filepath.Join(t.TempDir(), "none")
	cmd = talontest.RunTalon(t, nil, "get", "--dir", dir, "x")
	if cmd.Code != 2 || !strings.Contains(cmd.Stderr, "not a running `talon dev` directory") {
		t.Fatalf("get --dir of nothing: exit %d %s", cmd.Code, cmd.Stderr)
	}
	_ = os.RemoveAll(dir)
}

// refusedAfterHandshake dials addr with cfg, sends a Ping (a control
// port) or an HTTP request (a data port) and reads: it returns nil only
// when the server answered anything. With TLS 1.3 the server verifies a
// client certificate after the client's side of the handshake is done, so
// its refusal shows on the first read.
func refusedAfterHandshake(addr string, cfg *tls.Config) error {
	cfg.InsecureSkipVerify = true
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	cn := protocol.NewConn(c, protocol.ConnOptions{})
	_, err = cn.Call(context.Background(), &protocol.Ping{})
	var pe *protocol.Error
	if errors.As(err, &pe) || errors.Is(err, protocol.ErrBadMagic) || (err != nil && strings.Contains(err.Error(), "HTTP")) {
		return nil // an answer of some kind: it was served
	}
	return err
}
