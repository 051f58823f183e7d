package testsupport

import (
	"io"
	"net"
	"os"
	"testing"
)

// Loopback sends consecutive pieces of a file over one plain loopback TCP
// connection: for each piece the client asks for (one byte), the server
// sends the next one with io.Copy from the *os.File, which the kernel
// does with sendfile(2), from the start again at the end of the file. It
// is the network path alone, without HTTP or a cache: the ceiling a data
// listener on this machine can approach.
//
// A Loopback is used by one goroutine at a time.
type Loopback struct {
	conn  net.Conn
	piece int64
	buf   []byte
	ask   [1]byte // the one-byte request, kept here: Next allocates nothing
}

// NewLoopback serves path in pieces of piece bytes (at most the file's
// size) until the test ends. The client copies through a buffer of
// bufSize bytes.
func NewLoopback(tb testing.TB, path string, piece int64, bufSize int) *Loopback {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		tb.Fatal(err)
	}
	if piece <= 0 || piece > fi.Size() {
		f.Close()
		tb.Fatalf("loopback piece %d: must be from 1 to the file's %d bytes", piece, fi.Size())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		tb.Fatal(err)
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
		var off int64
		one := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, one); err != nil {
				return
			}
			if off+piece > fi.Size() {
				off = 0
			}
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				return
			}
			if _, err := io.Copy(c, io.LimitReader(f, piece)); err != nil {
				return
			}
			off += piece
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		<-done
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(); <-done })
	return &Loopback{conn: c, piece: piece, buf: make([]byte, bufSize)}
}

// Next asks for the next piece and copies it into w (hiding w's
// ReadFrom, so the copy goes through the buffer as a client's does). It
// returns the bytes copied; fewer than a piece comes with an error.
func (l *Loopback) Next(w io.Writer) (int64, error) {
	if _, err := l.conn.Write(l.ask[:]); err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(struct{ io.Writer }{w}, io.LimitReader(l.conn, l.piece), l.buf)
	if err == nil && n != l.piece {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
