//go:build unix

package blob

import "syscall"

// openNonBlock opens without blocking on a FIFO or device.
const openNonBlock = syscall.O_NONBLOCK
