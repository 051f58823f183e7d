package testsupport

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// HungListener accepts connections on host (a loopback address such as
// "127.0.0.1") and never answers them, as the kernel of a stopped
// (SIGSTOP) server does. It returns the address and the count of
// connections accepted; everything is closed when the test ends.
func HungListener(t testing.TB, host string) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), accepted
}
