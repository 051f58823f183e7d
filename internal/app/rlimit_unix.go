//go:build unix

package app

import "syscall"

// raiseNoFile raises the soft RLIMIT_NOFILE to the hard limit and returns
// the soft limit in effect (0 when it cannot be read).
func raiseNoFile() (soft uint64, raised bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	if r.Cur < r.Max {
		want := r
		want.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			return uint64(want.Cur), true
		}
	}
	return uint64(r.Cur), false
}
