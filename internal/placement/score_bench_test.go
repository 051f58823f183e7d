package placement

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/zeebo/xxh3"
)

// The score benchmarks compare candidate score functions for one key against
// 1,000 pre-hashed nodes, each inlined in its own loop (ns/candidate is what
// matters). splitmix is what score uses; the others are the alternatives it
// was measured against.

func scoreBenchHashes() []uint64 {
	hashes := make([]uint64, 1000)
	for i := range hashes {
		hashes[i] = nodeHash("worker-" + strconv.Itoa(i))
	}
	return hashes
}

func reportPerCandidate(b *testing.B, candidates int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(candidates), "ns/candidate")
}

func BenchmarkScoreSplitmix(b *testing.B) {
	hashes, kh := scoreBenchHashes(), xxh3.HashString("bench-key")
	var best uint64
	cpu := startCPU()
	for b.Loop() {
		for _, h := range hashes {
			best = max(best, score(kh, h))
		}
	}
	cpu.report(b, len(hashes))
	reportPerCandidate(b, len(hashes))
	_ = best
}

func fmix64(z uint64) uint64 {
	z ^= z >> 33
	z *= 0xff51afd7ed558ccd
	z ^= z >> 33
	z *= 0xc4ceb9fe1a85ec53
	return z ^ z>>33
}

func BenchmarkScoreMurmurFmix(b *testing.B) {
	hashes, kh := scoreBenchHashes(), xxh3.HashString("bench-key")
	var best uint64
	cpu := startCPU()
	for b.Loop() {
		for _, h := range hashes {
			best = max(best, fmix64(kh^h))
		}
	}
	cpu.report(b, len(hashes))
	reportPerCandidate(b, len(hashes))
	_ = best
}

func BenchmarkScoreXXH3Of16Bytes(b *testing.B) {
	hashes, kh := scoreBenchHashes(), xxh3.HashString("bench-key")
	var best uint64
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], kh)
	cpu := startCPU()
	for b.Loop() {
		for _, h := range hashes {
			binary.LittleEndian.PutUint64(buf[8:], h)
			best = max(best, xxh3.Hash(buf[:]))
		}
	}
	cpu.report(b, len(hashes))
	reportPerCandidate(b, len(hashes))
	_ = best
}
