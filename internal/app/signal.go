package app

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SignalContext returns a context cancelled by the first SIGINT or SIGTERM,
// which starts a graceful drain; a second signal exits at once with status
// 128+signal (130 or 143), for an operator who does not want to wait. The
// returned function may be called more than once.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-ch:
			fmt.Fprintf(os.Stderr, "talon: second %v: exiting without draining\n", s)
			code := 130 // 128 + SIGINT
			if s == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel()
		})
	}
}
