package etcd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testenv"
)

// optionsFor returns store options for e: its endpoints, TLS files and,
// with auth, the root user.
func optionsFor(e *testenv.Etcd, cache bool) Options {
	o := DefaultOptions()
	o.Endpoints = e.Endpoints()
	o.CacheSnapshots = cache
	if f := e.TLSFiles(); f.CAFile != "" {
		o.TLS = TLSOptions{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
	}
	if pw := e.RootPassword(); pw != "" {
		o.Username, o.Password = testenv.EtcdRootUser, pw
	}
	return o
}

// newStore builds a store and closes it in a cleanup.
func newStore(t testing.TB, o Options) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// record returns a valid record.
func record(clusterID string, role cluster.Role, node, inc string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID:       clusterID,
		NodeID:          node,
		Role:            role,
		IncarnationID:   inc,
		Address:         "127.0.0.1:7000",
		Version:         "test",
		StartTimeUnixMs: 1,
		HeartbeatSeq:    seq,
		Health:          cluster.HealthHealthy,
		Ready:           true,
	}
}

var clusterSeq atomic.Int64

// uniqueCluster returns a cluster ID no other test uses.
func uniqueCluster(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return fmt.Sprintf("c%d-%s", clusterSeq.Add(1), strings.Trim(name, "-"))
}

// rpcCounter counts the requests a client puts on the wire: each unary
// call attempt and each message sent on a stream, by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newRPCCounter() *rpcCounter { return &rpcCounter{n: make(map[string]int)} }

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

// snapshot returns the counts so far and resets them.
func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = make(map[string]int)
	return n
}

// dialOptions installs the counter innermost, below the client's retry
// interceptor, so it sees what goes on the wire.
func (c *rpcCounter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &countingStream{ClientStream: cs, c: c, method: method}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	c      *rpcCounter
	method string
}

func (s *countingStream) SendMsg(m any) error {
	s.c.add(s.method)
	return s.ClientStream.SendMsg(m)
}

func leaseID(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }
