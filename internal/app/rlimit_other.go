//go:build !unix

package app

func raiseNoFile() (soft uint64, raised bool) { return 0, false }
