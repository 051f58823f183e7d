package cmdutil

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"

	"github.com/talonhq/talon/internal/apiv1"
)

// Endpoint is one coordinator's admin listener, asked alone (no failover):
// commands that show every coordinator's own view use one per coordinator.
type Endpoint struct {
	// NodeID is the coordinator's node ID when its record named it; empty
	// for a --server URL no record advertises (the answer names it).
	NodeID string
	// URL is the admin base URL.
	URL string
	// Version is the build version of its record; empty when unknown.
	Version string
	Client  *apiv1.Client
}

// Name is the endpoint's node ID, or its URL when the ID is unknown.
func (e *Endpoint) Name() string {
	if e.NodeID != "" {
		return e.NodeID
	}
	return e.URL
}

// Coordinators returns an endpoint for every coordinator of the cluster:
// those whose records (read through the failover client, stale allowed, so
// that a cluster failing closed still lists them) advertise an admin
// address, and every --server URL besides (a coordinator without a record
// yet, or behind a name the records do not use). listErr is the error of
// the record listing, when it failed; the servers are still returned.
func (f *Factory) Coordinators(ctx context.Context) (eps []*Endpoint, listErr error, err error) {
	conn, err := f.Connection()
	if err != nil {
		return nil, nil, err
	}
	main, err := f.ClientFor(conn, 0)
	if err != nil {
		return nil, nil, err
	}
	scheme := "http"
	tlsCfg, err := conn.TLSConfig()
	if err != nil {
		return nil, nil, UsageError(err)
	}
	if tlsCfg != nil || (len(main.BaseURLs()) > 0 && strings.HasPrefix(main.BaseURLs()[0], "https://")) {
		scheme = "https"
	}
	seen := map[string]bool{} // host:port
	add := func(nodeID, version, base string) error {
		u, perr := url.Parse(base)
		if perr != nil || seen[u.Host] {
			return nil
		}
		seen[u.Host] = true
		c2 := *conn
		c2.Servers = []string{base}
		cl, err := f.ClientFor(&c2, 0)
		if err != nil {
			return err
		}
		eps = append(eps, &Endpoint{NodeID: nodeID, URL: base, Version: version, Client: cl})
		return nil
	}
	list, listErr := main.AllNodes(ctx, apiv1.NodeFilter{Role: "coordinator"}, apiv1.AllowStale())
	if listErr == nil {
		for _, n := range list.Items {
			if n.AdminAddress == "" {
				continue
			}
			if err := add(n.NodeID, n.Version, scheme+"://"+n.AdminAddress); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, base := range main.BaseURLs() {
		if err := add("", "", base); err != nil {
			return nil, nil, err
		}
	}
	return eps, listErr, nil
}

// AdminClient returns a client for one process's advertised admin address
// (host:port, as its record has it) with the connection's token, TLS
// settings and timeout: https when the connection uses TLS (a CA file,
// --insecure-skip-tls-verify or an https:// server), http otherwise.
func (f *Factory) AdminClient(adminAddress string) (*apiv1.Client, string, error) {
	conn, err := f.Connection()
	if err != nil {
		return nil, "", err
	}
	tlsCfg, err := conn.TLSConfig()
	if err != nil {
		return nil, "", UsageError(err)
	}
	scheme := "http"
	if tlsCfg != nil || (len(conn.Servers) > 0 && strings.HasPrefix(strings.TrimSpace(conn.Servers[0]), "https://")) {
		scheme = "https"
	}
	c2 := *conn
	c2.Servers = []string{scheme + "://" + adminAddress}
	cl, err := f.ClientFor(&c2, 0)
	return cl, c2.Servers[0], err
}

// Each calls fn for every endpoint concurrently and waits for all.
func Each(eps []*Endpoint, fn func(i int, ep *Endpoint)) {
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i, ep) }()
	}
	wg.Wait()
}

// NameEndpoints fills in the node IDs of endpoints from the answers (a
// --server URL learns its coordinator's name) and drops an endpoint that
// turns out to be one already listed under another address.
func NameEndpoints(eps []*Endpoint, names []string) []int {
	keep := []int{}
	byName := map[string]bool{}
	for i, ep := range eps {
		if ep.NodeID != "" {
			byName[ep.NodeID] = true
		}
		_ = i
	}
	for i, ep := range eps {
		if ep.NodeID == "" && names[i] != "" {
			if byName[names[i]] {
				continue // the same coordinator, also reached through its record's address
			}
			ep.NodeID = names[i]
			byName[names[i]] = true
		}
		keep = append(keep, i)
	}
	return keep
}

// NoAnswer says briefly why a server gave no answer (connection refused,
// timed out, no such host, a TLS failure), for a table cell; the full
// message otherwise.
func NoAnswer(err error) string {
	msg := err.Error()
	for _, c := range []struct{ in, out string }{
		{"connection refused", "no answer: connection refused"},
		{"deadline exceeded", "no answer: timed out"},
		{"Client.Timeout", "no answer: timed out"},
		{"no such host", "no answer: no such host"},
		{"tls: ", "no answer: TLS handshake failed"},
		{"x509: ", "no answer: TLS certificate not trusted (--ca-file)"},
		{"connection reset", "no answer: connection reset"},
		{"EOF", "no answer: connection closed (not an admin address?)"},
	} {
		if strings.Contains(msg, c.in) {
			return c.out
		}
	}
	return Message(err)
}

// IsUnreachable reports whether err means no answer at all (as opposed
// to an answer that is an error).
func IsUnreachable(err error) bool {
	var ae *apiv1.APIError
	return err != nil && !errors.As(err, &ae)
}
