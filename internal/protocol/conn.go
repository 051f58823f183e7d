package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// ResponseType returns the type of a successful response to a request of
// type t (an Error may always come instead), and false when t is not a
// request.
func ResponseType(t Type) (Type, bool) {
	switch t {
	case TypePing:
		return TypePong, true
	case TypeRegister, TypeHeartbeat, TypeDeregister:
		return TypeAck, true
	case TypeAttest:
		return TypeAttested, true
	case TypeInstructions:
		return TypeInstructed, true
	case TypeJobs:
		return TypeJobOrders, true
	case TypeSubscribe:
		return TypeEpochBump, true
	case TypePlacementLookup:
		return TypePlacementResponse, true
	}
	return 0, false
}

// ErrConnBroken is matched by the error a Conn returns once it can no
// longer be used (a write was interrupted, the stream ended, the peer
// broke the protocol, or the server sent a connection-level Error). The
// caller closes it and dials again.
var ErrConnBroken = errors.New("control connection broken")

// ConnOptions configures a Conn.
type ConnOptions struct {
	// OnEpochBump receives every EpochBump the coordinator pushes (request
	// ID 0) after a Subscribe. It runs on the goroutine inside Call or
	// Poll, so it must not call the Conn. Nil discards pushes.
	OnEpochBump func(EpochBump)
}

// Conn is a synchronous client of the control protocol over one
// connection: Call sends a request and waits for its response, Poll waits
// for pushes. Neither starts a goroutine that outlives it; deadlines come
// from the context through net.Conn.SetDeadline.
//
// A Call abandoned by its context leaves the connection usable: the late
// response is recognised by its request ID and discarded by the next Call
// or Poll. Only an interrupted write breaks the connection.
//
// Conn does not read while it writes, so it relies on socket buffers to
// hold a late response or push while a request is written: use it over
// TCP, not over an unbuffered net.Pipe with a server that writes
// unprompted.
type Conn struct {
	nc     net.Conn
	onBump func(EpochBump)

	mu     sync.Mutex // serialises Call and Poll, and guards the fields below
	enc    *Encoder
	dec    *Decoder
	lastID uint64 // the last request ID sent; IDs start at 1
	err    error  // terminal error (matches ErrConnBroken); once set, returned by every call
}

// NewConn returns a Conn over nc. The Conn owns nc: Close closes it.
func NewConn(nc net.Conn, opts ConnOptions) *Conn {
	return &Conn{
		nc:     nc,
		onBump: opts.OnEpochBump,
		enc:    NewEncoder(nc),
		dec:    NewDecoder(bufio.NewReaderSize(nc, 4096)),
	}
}

// Close closes the connection. It may be called concurrently with Call or
// Poll, which then return promptly with an error.
func (c *Conn) Close() error { return c.nc.Close() }

// Call sends req and returns its response. A response that is an Error
// is returned as the error (*Error; test it with IsCode or errors.Is).
// When ctx ends first Call returns ctx.Err(). A response of the wrong
// type for req is an error wrapping ErrMalformed.
func (c *Conn) Call(ctx context.Context, req Message) (Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stop := c.deadline(ctx)
	defer stop()

	id := c.lastID + 1
	if err := c.enc.Encode(id, req); err != nil {
		if errors.Is(err, ErrMalformed) || errors.Is(err, ErrFrameTooLarge) {
			return nil, err // nothing was written
		}
		c.err = fmt.Errorf("protocol: %w: %w", ErrConnBroken, err)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.err
	}
	c.lastID = id
	for {
		f, err := c.dec.ReadFrame()
		if err != nil {
			return nil, c.readErr(ctx, err)
		}
		resp, done, err := c.handle(f, id)
		if err != nil || done {
			if err == nil {
				if want, ok := ResponseType(req.Type()); ok && resp.Type() != want {
					return nil, fmt.Errorf("protocol: %w: %s answered with %s, want %s", ErrMalformed, req.Type(), resp.Type(), want)
				}
			}
			return resp, err
		}
	}
}

// Poll reads pushes until ctx ends, delivering EpochBump to OnEpochBump
// and discarding late responses to abandoned calls. It returns ctx.Err()
// when ctx ends, or the error that broke the connection.
func (c *Conn) Poll(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := c.deadline(ctx)
	defer stop()
	for {
		f, err := c.dec.ReadFrame()
		if err != nil {
			return c.readErr(ctx, err)
		}
		if _, _, err := c.handle(f, 0); err != nil {
			return err
		}
	}
}

// handle processes one frame while waiting for the response to request
// id (0 when none is pending). done reports that f was that response;
// resp is nil when the response is an Error, which is then err.
func (c *Conn) handle(f Frame, id uint64) (resp Message, done bool, err error) {
	switch {
	case f.RequestID == 0:
		return nil, false, c.push(f)
	case id != 0 && f.RequestID == id:
		m, err := f.Message()
		if err != nil {
			// The frame was read whole: the stream is still framed.
			return nil, true, fmt.Errorf("protocol: response to request %d: %w", id, err)
		}
		if e, ok := m.(*Error); ok {
			return nil, true, e
		}
		return m, true, nil
	case f.RequestID <= c.lastID:
		return nil, false, nil // the late response to an abandoned call
	}
	c.err = fmt.Errorf("protocol: %w: response to request %d, which was never sent", ErrConnBroken, f.RequestID)
	return nil, false, c.err
}

// push processes a frame the server sent unprompted.
func (c *Conn) push(f Frame) error {
	m, err := f.Message()
	if err != nil {
		c.err = fmt.Errorf("protocol: %w: push: %w", ErrConnBroken, err)
		return c.err
	}
	switch m := m.(type) {
	case *EpochBump:
		if c.onBump != nil {
			c.onBump(*m)
		}
		return nil
	case *Error:
		// A connection-level error: the server closes the connection.
		c.err = fmt.Errorf("protocol: %w: %w", ErrConnBroken, m)
		return c.err
	}
	c.err = fmt.Errorf("protocol: %w: unexpected %s push", ErrConnBroken, m.Type())
	return c.err
}

// readErr classifies a ReadFrame error: a deadline leaves the connection
// usable (the Decoder keeps the partial frame), anything else breaks it.
func (c *Conn) readErr(ctx context.Context, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return context.DeadlineExceeded
	}
	c.err = fmt.Errorf("protocol: %w: %w", ErrConnBroken, err)
	return c.err
}

// deadline applies ctx's deadline to the connection and arranges for ctx
// cancellation to interrupt blocked I/O. stop waits for the interruption,
// if it started, so that it cannot land on a later call.
func (c *Conn) deadline(ctx context.Context) (stop func()) {
	d, _ := ctx.Deadline()
	_ = c.nc.SetDeadline(d) // an error means the conn is closed; I/O will say so
	if ctx.Done() == nil {
		return func() {}
	}
	fired := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		_ = c.nc.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	return func() {
		if !stopAfter() {
			<-fired
		}
	}
}
