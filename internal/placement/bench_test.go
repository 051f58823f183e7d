package placement

import (
	"fmt"
	"testing"
)

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
			for b.Loop() {
				dst = tbl.LookupInto(ks[i&1023], replicas, dst)
				i++
			}
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
			for b.Loop() {
				if _, err := New(nodes); err != nil {
					b.Fatal(err)
				}
			}
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
			for b.Loop() {
				_ = tbl.Explain(ks[i&1023])
				i++
			}
		})
	}
}
