package testsupport

import (
	"hash/crc64"
)

// crc64NVME is the CRC-64/NVME table (as package blob's).
var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// ForgeCRC64NVME returns a copy of data with the byte at at changed and
// the 8 bytes at fix (which must not cover at) rewritten so that the
// copy has data's CRC-64/NVME: the forgery that shows a CRC vouches for
// nothing against an adversary. A CRC is affine in its input, so the 64
// bits of fix that cancel the change are the solution of a 64x64 linear
// system over GF(2).
func ForgeCRC64NVME(data []byte, at, fix int) []byte {
	n := len(data)
	zero := crc64.Checksum(make([]byte, n), crc64NVME)
	// lin is the linear part of the CRC of a message of n bytes that has
	// only bit b of byte i set.
	lin := func(i, b int) uint64 {
		m := make([]byte, n)
		m[i] = 1 << b
		return crc64.Checksum(m, crc64NVME) ^ zero
	}
	target := lin(at, 0) // the change: flip bit 0 of data[at]
	// Solve sum_k x_k * col_k = target, col_k = lin(fix+k/8, k%8).
	var cols [64]uint64
	for k := range 64 {
		cols[k] = lin(fix+k/8, k%8)
	}
	// Gaussian elimination on the rows (bits of the CRC): row r is the
	// 64 coefficients cols[k] bit r, augmented with target bit r.
	var rows [64]uint64
	var rhs [64]uint64
	for r := range 64 {
		for k := range 64 {
			rows[r] |= (cols[k] >> r & 1) << k
		}
		rhs[r] = target >> r & 1
	}
	pivotOf := [64]int{}
	rank := 0
	for k := 0; k < 64 && rank < 64; k++ {
		p := -1
		for r := rank; r < 64; r++ {
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
		for r := range 64 {
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
	for k := range 64 {
		out[fix+k/8] ^= byte(x>>k&1) << (k % 8)
	}
	return out
}
