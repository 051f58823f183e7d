//go:build !unix

package blob

const openNonBlock = 0
