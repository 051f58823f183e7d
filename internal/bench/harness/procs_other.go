//go:build !linux

package harness

import "syscall"

// sysProcAttr is nil off Linux, which has no parent-death signal (and no
// /proc for the fleet rows' figures).
func sysProcAttr() *syscall.SysProcAttr { return nil }
