package integration

import (
	"io"
	"net"
	"os"
	"testing"
)

// loopbackCeiling serves bytes [0, n) of the file at path over one plain
// loopback TCP connection: each call of the returned function asks for
// them (one byte), the server sends them with io.Copy from the *os.File
// (sendfile(2)), and the client reads them into w. It is the network
// path alone, without HTTP or a cache: the ceiling a data listener on
// this machine can approach.
func loopbackCeiling(t *testing.T, path string, n int64) func(w io.Writer) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		one := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, one); err != nil {
				return
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return
			}
			if _, err := io.Copy(c, io.LimitReader(f, n)); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); <-done })
	return func(w io.Writer) int64 {
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		got, err := io.Copy(w, io.LimitReader(c, n))
		if err != nil || got != n {
			t.Fatalf("loopback: %d of %d bytes: %v", got, n, err)
		}
		return got
	}
}
