package placement

import (
	"fmt"
	"testing"
	"time"
)

// cpuMeter reports CPU time per op (cpu-ns/op) and, for lookups, per
// candidate, beside the wall-clock ns/op the framework prints. On a loaded
// machine wall time includes time the benchmark sat descheduled; CPU time
// is the cost of the code. Start it just before b.Loop and stop it after.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	c, ok := processCPU()
	return cpuMeter{start: c, ok: ok}
}

func (m cpuMeter) report(b *testing.B, candidates int) {
	end, ok := processCPU()
	if !m.ok || !ok || b.N == 0 {
		return
	}
	perOp := float64((end - m.start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp, "cpu-ns/op")
	if candidates > 0 {
		b.ReportMetric(perOp/float64(candidates), "cpu-ns/candidate")
	}
}

var benchSizes = []int{100, 1000, 10000}

// BenchmarkLookup measures the hot path: LookupInto with a reused buffer,
// 3 replicas, cycling through 1,024 keys. ns/candidate is ns/op divided by
// the number of workers.
func BenchmarkLookup(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("workers=%d", size), func(b *testing.B) {
			tbl := mustNew(b, workers(size))
			ks := keys(1024)
			dst := make([]Owner, 0, replicas)
			i := 0
			cpu := startCPU()
			for b.Loop() {
				dst = tbl.LookupInto(ks[i&1023], replicas, dst)
				i++
			}
			cpu.report(b, size)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/candidate")
		})
	}
}

// BenchmarkNew measures building a table: copy, sort, validate, hash every
// ID and compute the Version. The input is shuffled so the sort does work.
func BenchmarkNew(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("workers=%d", size), func(b *testing.B) {
			nodes := shuffled(workers(size), 1)
			cpu := startCPU()
			for b.Loop() {
				if _, err := New(nodes); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b, 0)
		})
	}
}

// BenchmarkExplain measures the management API's full ranking.
func BenchmarkExplain(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("workers=%d", size), func(b *testing.B) {
			tbl := mustNew(b, workers(size))
			ks := keys(1024)
			i := 0
			cpu := startCPU()
			for b.Loop() {
				_ = tbl.Explain(ks[i&1023])
				i++
			}
			cpu.report(b, 0)
		})
	}
}
