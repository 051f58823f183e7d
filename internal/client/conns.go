package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/talonhq/talon/internal/protocol"
)

// get returns an idle pooled connection to addr (pooled true) or dials one.
func (c *Client) get(ctx context.Context, addr string) (cn *protocol.Conn, pooled bool, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, errors.New("client: closed")
	}
	var expired []*protocol.Conn
	for p := c.pools[addr]; len(p) > 0; p = c.pools[addr] {
		cn := p[len(p)-1]
		c.pools[addr] = p[:len(p)-1]
		if until, ok := c.validUntil[cn]; ok && !c.now().Add(ConnRenewMargin).Before(until) {
			delete(c.validUntil, cn)
			expired = append(expired, cn)
			continue
		}
		c.mu.Unlock()
		closeAll(expired)
		return cn, true, nil
	}
	c.mu.Unlock()
	closeAll(expired)
	cn, err = c.dial(ctx, addr)
	return cn, false, err
}

func (c *Client) dial(ctx context.Context, addr string) (*protocol.Conn, error) {
	nc, err := c.opts.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cn := protocol.NewConn(nc, protocol.ConnOptions{})
	if c.opts.OnConnect == nil {
		return cn, nil
	}
	until, err := c.opts.OnConnect(ctx, cn)
	if err != nil {
		_ = cn.Close()
		return nil, err
	}
	if !until.IsZero() {
		c.mu.Lock()
		c.validUntil[cn] = until
		c.mu.Unlock()
	}
	return cn, nil
}

func closeAll(conns []*protocol.Conn) {
	for _, cn := range conns {
		_ = cn.Close()
	}
}

// dropIdle closes addr's idle connections: one was found closed, and the
// others idled as long, to the same process.
func (c *Client) dropIdle(addr string) {
	c.mu.Lock()
	idle := c.pools[addr]
	delete(c.pools, addr)
	c.mu.Unlock()
	for _, cn := range idle {
		c.discard(cn)
	}
}

func (c *Client) put(addr string, cn *protocol.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.pools[addr]) >= c.opts.MaxIdleConns {
		_ = cn.Close()
		delete(c.validUntil, cn)
		return
	}
	c.pools[addr] = append(c.pools[addr], cn)
}

// tlsDial wraps dial: the connection is handed over after a TLS handshake
// bounded by ctx.
func tlsDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("tls handshake with coordinator %s: %w", addr, err)
		}
		return tc, nil
	}
}

// hint explains the usual causes of a failure to talk to addr: a port that
// is not a coordinator's control port, or TLS on one side only.
func (c *Client) hint(addr string, err error) error {
	var rh tls.RecordHeaderError
	switch {
	case errors.Is(err, protocol.ErrBadMagic) && strings.Contains(err.Error(), `"HTTP"`):
		return fmt.Errorf("%s answered HTTP, not Talon's control protocol: it is an admin or data address; give coordinators' control addresses (port 7400 by default): %w", addr, err)
	case errors.Is(err, protocol.ErrBadMagic):
		return fmt.Errorf("%s is not a Talon coordinator's control port: %w", addr, err)
	case c.opts.TLS != nil && errors.As(err, &rh):
		return fmt.Errorf("%s does not speak TLS: a coordinator run with insecure-control-plane? (then pass --insecure-control-plane): %w", addr, err)
	case c.opts.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		return fmt.Errorf("%s closed the connection without answering: if its coordinators use mutual TLS, give a client credential (--tls-ca-file, --tls-cert-file, --tls-key-file, or --dir of a talon dev cluster): %w", addr, err)
	}
	return err
}
