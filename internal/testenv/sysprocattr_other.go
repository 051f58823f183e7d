//go:build !linux

package testenv

import "syscall"

// sysProcAttr has no parent-death signal outside Linux; the t.Cleanup kill
// still runs for every test that finishes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
