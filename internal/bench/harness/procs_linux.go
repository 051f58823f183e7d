package harness

import "syscall"

// sysProcAttr makes the kernel SIGKILL a child (coordinator, fleet) when
// the harness dies, so a killed run leaves no process behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
