package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/pkitest"
)

// benchPKI is talontest.PKI for benchmarks.
func benchPKI(b *testing.B) (*pki.CA, string) {
	b.Helper()
	dir := b.TempDir()
	ca, err := pki.NewCA("bench", time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		b.Fatal(err)
	}
	return ca, dir
}

func benchSource(b *testing.B, ca *pki.CA, dir string, role pki.Role, node string) *pki.Source {
	b.Helper()
	return pkitest.Source(b, ca, dir, pki.Identity{Role: role, NodeID: node})
}

// BenchmarkControlPlaneTLS measures the control plane with mutual TLS off
// and on, in the same run, on the memory store over loopback:
//   - lookups: placement lookups over pooled connections (100 workers);
//   - heartbeats: 16 workers heartbeating as fast as they can, each over
//     its own connection and, with TLS, its own certificate;
//   - connect: a new connection and one lookup each time; with TLS
//     "resumed" reuses the client's session cache, "full" does a full
//     handshake each time.
func BenchmarkControlPlaneTLS(b *testing.B) {
	ca, dir := benchPKI(b)
	coordSrc := benchSource(b, ca, dir, pki.RoleCoordinator, "c")
	toCoord := pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}}
	clientSrc := benchSource(b, ca, dir, pki.RoleClient, "bench")
	timing := cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}
	start := func(b *testing.B, on bool) string {
		store := memory.New(memory.Options{})
		b.Cleanup(func() { store.Close() })
		for i := range 100 {
			if _, err := store.UpsertNode(context.Background(), &cluster.Record{FeatureLevel: cluster.BuildLevel,
				ClusterID: "bench", NodeID: fmt.Sprintf("worker-%03d", i), Role: cluster.RoleWorker, IncarnationID: "i",
				Address: fmt.Sprintf("10.0.0.%d:7500", i+1), Health: cluster.HealthHealthy, Ready: true,
			}, timing.LeaseTTL); err != nil {
				b.Fatal(err)
			}
		}
		o := coordtest.Options{ClusterID: "bench", NodeID: "c", Timing: timing, RequestTimeout: 2 * time.Second, ShutdownTimeout: time.Second, Store: store, WaitReady: true}
		if on {
			o.TLS = coordSrc.ServerConfig(pki.Expect{})
		}
		return coordtest.Start(b, o).ControlAddr
	}
	modes := []struct {
		name string
		on   bool
	}{{"plain", false}, {"mtls", true}}

	for _, m := range modes {
		b.Run("lookups/"+m.name, func(b *testing.B) {
			addr := start(b, m.on)
			o := client.Options{Coordinators: []string{addr}, MaxIdleConns: 64, Retries: -1}
			if m.on {
				o.TLS = clientSrc.ClientConfig(toCoord)
			}
			cl, err := client.New(o)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			parallelLookups(b, cl)
		})
	}
	const hbWorkers = 16
	var hbSources [hbWorkers]*pki.Source
	for i := range hbSources {
		hbSources[i] = benchSource(b, ca, dir, pki.RoleWorker, fmt.Sprintf("hb-%02d", i))
	}
	for _, m := range modes {
		b.Run("heartbeats/"+m.name, func(b *testing.B) {
			addr := start(b, m.on)
			var next atomic.Int64
			b.SetParallelism(max(1, hbWorkers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			begin := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1)-1) % hbWorkers
				node := fmt.Sprintf("hb-%02d", w)
				o := client.Options{Coordinators: []string{addr}, Retries: -1}
				if m.on {
					o.TLS = hbSources[w].ClientConfig(toCoord)
				}
				cl, err := client.New(o)
				if err != nil {
					b.Error(err)
					return
				}
				defer cl.Close()
				rec := &cluster.Record{FeatureLevel: cluster.BuildLevel, ClusterID: "bench", NodeID: node, Role: cluster.RoleWorker, IncarnationID: fmt.Sprintf("inc-%d-%d", w, time.Now().UnixNano()),
					Address: "127.0.0.1:1", Version: "bench", StartTimeUnixMs: time.Now().UnixMilli(), Health: cluster.HealthHealthy, Ready: true}
				msg, _ := protocol.NewRegister(rec)
				if _, err := cl.Call(context.Background(), msg); err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					rec.HeartbeatSeq++
					msg, _ := protocol.NewHeartbeat(rec)
					if _, err := cl.Call(context.Background(), msg); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "heartbeats/s")
		})
	}
	for _, c := range []struct {
		name string
		cfg  func() *tls.Config
	}{
		{"plain", func() *tls.Config { return nil }},
		{"mtls-resumed", func() *tls.Config { return clientSrc.ClientConfig(toCoord) }},
		{"mtls-full", func() *tls.Config {
			cfg := clientSrc.ClientConfig(toCoord)
			cfg.ClientSessionCache = nil
			return cfg
		}},
	} {
		b.Run("connect/"+c.name, func(b *testing.B) {
			addr := start(b, c.name != "plain")
			cfg := c.cfg()
			b.ResetTimer()
			for range b.N {
				cl, err := client.New(client.Options{Coordinators: []string{addr}, Retries: -1, TLS: cfg})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cl.Lookup(context.Background(), "k#0", 3); err != nil {
					b.Fatal(err)
				}
				cl.Close()
			}
		})
	}
}
