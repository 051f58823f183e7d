package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// BenchmarkLookupsOverProtocol measures end-to-end placement lookups over
// the control protocol on loopback: client, TCP, coordinator, a consistent
// store snapshot per batch of requests, HRW over 100 workers. No client
// cache. Reported as lookups/s.
func BenchmarkLookupsOverProtocol(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		benchLookups(b, memory.New(memory.Options{}))
	})
	b.Run("etcd", func(b *testing.B) {
		if testing.Short() {
			b.Skip("needs etcd")
		}
		e := testenv.StartEtcd(b, testenv.EtcdOptions{})
		o := etcd.DefaultOptions()
		o.Endpoints = e.Endpoints()
		s, err := etcd.New(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		benchLookups(b, s)
	})
}

func benchLookups(b *testing.B, store state.Store) {
	b.Cleanup(func() { store.Close() }) // after the coordinator has stopped
	timing := cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}
	for i := range 100 {
		_, err := store.UpsertNode(context.Background(), &cluster.Record{FeatureLevel: cluster.BuildLevel,
			ClusterID: "bench", NodeID: fmt.Sprintf("worker-%03d", i), Role: cluster.RoleWorker, IncarnationID: "i",
			Address: fmt.Sprintf("10.0.%d.%d:7500", i/250, i%250+1), Health: cluster.HealthHealthy, Ready: true,
		}, timing.LeaseTTL)
		if err != nil {
			b.Fatal(err)
		}
	}
	c := coordtest.Start(b, coordtest.Options{
		ClusterID: "bench", NodeID: "c", Timing: timing, RequestTimeout: 2 * time.Second, ShutdownTimeout: time.Second, Store: store,
	})
	cl, err := client.New(client.Options{Coordinators: []string{c.ControlAddr}, MaxIdleConns: 64, Retries: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for start := time.Now(); ; {
		if _, err := cl.Lookup(context.Background(), "warm", 3); err == nil {
			break
		} else if time.Since(start) > 10*time.Second {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	parallelLookups(b, cl)
}

// parallelLookups looks up distinct keys from 8 x GOMAXPROCS goroutines
// for b.N lookups and reports lookups/s.
func parallelLookups(b *testing.B, cl *client.Client) {
	var n atomic.Uint64
	b.SetParallelism(8)
	b.ResetTimer()
	begin := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := n.Add(1) << 32
		for pb.Next() {
			i++
			if _, err := cl.Lookup(context.Background(), fmt.Sprintf("bench/object-%d#0", i), 3); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "lookups/s")
}
