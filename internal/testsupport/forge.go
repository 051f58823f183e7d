package testsupport

import (
	"hash/crc32"
	"hash/crc64"
)

// crc64NVME is the CRC-64/NVME table (as package blob's).
var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

var crc32C = crc32.MakeTable(crc32.Castagnoli)

// ForgeCRC64NVME returns a copy of data with the byte at at changed and
// the 8 bytes at fix (which must not cover at) rewritten so that the
// copy has data's CRC-64/NVME: the forgery that shows a CRC vouches for
// nothing against an adversary.
func ForgeCRC64NVME(data []byte, at, fix int) []byte {
	return forgeCRC(data, at, fix, 64, func(b []byte) uint64 { return crc64.Checksum(b, crc64NVME) })
}

// ForgeCRC32C is ForgeCRC64NVME for CRC-32C (Castagnoli), with the 4
// bytes at fix rewritten.
func ForgeCRC32C(data []byte, at, fix int) []byte {
	return forgeCRC(data, at, fix, 32, func(b []byte) uint64 { return uint64(crc32.Checksum(b, crc32C)) })
}

// forgeCRC flips bit 0 of data[at] and rewrites the width bits at fix so
// that the copy has data's sum, a CRC of width bits. A CRC is affine in
// its input, so the bits of fix that cancel the change are the solution
// of a width x width linear system over GF(2).
func forgeCRC(data []byte, at, fix, width int, sum func([]byte) uint64) []byte {
	n := len(data)
	zero := sum(make([]byte, n))
	// lin is the linear part of the CRC of a message of n bytes that has
	// only bit b of byte i set.
	lin := func(i, b int) uint64 {
		m := make([]byte, n)
		m[i] = 1 << b
		return sum(m) ^ zero
	}
	target := lin(at, 0) // the change: flip bit 0 of data[at]
	// Solve sum_k x_k * col_k = target, col_k = lin(fix+k/8, k%8).
	cols := make([]uint64, width)
	for k := range width {
		cols[k] = lin(fix+k/8, k%8)
	}
	// Gaussian elimination on the rows (bits of the CRC): row r is the
	// width coefficients cols[k] bit r, augmented with target bit r.
	rows, rhs, pivotOf := make([]uint64, width), make([]uint64, width), make([]int, width)
	for r := range width {
		for k := range width {
			rows[r] |= (cols[k] >> r & 1) << k
		}
		rhs[r] = target >> r & 1
	}
	rank := 0
	for k := 0; k < width && rank < width; k++ {
		p := -1
		for r := rank; r < width; r++ {
			if rows[r]>>k&1 == 1 {
				p = r
				break
			}
		}
		if p < 0 {
			continue
		}
		rows[rank], rows[p] = rows[p], rows[rank]
		rhs[rank], rhs[p] = rhs[p], rhs[rank]
		for r := range width {
			if r != rank && rows[r]>>k&1 == 1 {
				rows[r] ^= rows[rank]
				rhs[r] ^= rhs[rank]
			}
		}
		pivotOf[rank] = k
		rank++
	}
	var x uint64
	for r := range rank {
		x |= rhs[r] << pivotOf[r]
	}
	out := append([]byte(nil), data...)
	out[at] ^= 1
	for k := range width {
		out[fix+k/8] ^= byte(x>>k&1) << (k % 8)
	}
	return out
}
