package testenv

import "syscall"

// sysProcAttr makes the kernel SIGKILL a server when the test binary dies,
// so a test killed by `go test -timeout` or a crash leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
