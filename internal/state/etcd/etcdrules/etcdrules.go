// Package etcdrules holds the rules of the etcd settings that both the
// configuration (talon config validate, start-up) and the etcd store
// (etcd.Options.Validate) check, so that the two give the same answer for
// every value (issue 39: `etcd-prefix=/talon/` passed config validation
// and was refused at start-up; a unix:// endpoint the other way round).
// It imports nothing of Talon's and no client library.
package etcdrules

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// MaxPrefixBytes bounds the key prefix.
const MaxPrefixBytes = 256

// DefaultPrefix is the key prefix an empty setting stands for.
const DefaultPrefix = "/talon"

// Endpoint checks one etcd client endpoint: host:port, or an http://,
// https://, unix:// or unixs:// URL, without credentials (the etcd
// client ignores them: a user would run unauthenticated by surprise).
// The error says what is wrong, without the value (the caller names it,
// redacted).
func Endpoint(ep string) error {
	if ep == "" {
		return errors.New("must not be empty")
	}
	if !strings.Contains(ep, "://") {
		if _, _, err := net.SplitHostPort(ep); err != nil {
			return errors.New("must be host:port or an http, https, unix or unixs URL")
		}
		return nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return errors.New("does not parse as a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix" && u.Scheme != "unixs":
		return fmt.Errorf("scheme %q: must be http, https, unix or unixs", u.Scheme)
	case u.User != nil:
		return errors.New("credentials in an endpoint URL are not used: set the etcd user name and password file instead")
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host == "":
		return errors.New("URL has no host")
	case u.Host == "" && u.Path == "":
		return errors.New("must name a host or a socket path")
	}
	return nil
}

// Prefix checks the key prefix: it starts with "/", does not end with
// one, holds no "//" and is at most MaxPrefixBytes long.
func Prefix(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return errors.New(`must start with "/"`)
	case strings.HasSuffix(p, "/"):
		return errors.New(`must not end with "/"`)
	case strings.Contains(p, "//"):
		return errors.New(`must not contain "//"`)
	case len(p) > MaxPrefixBytes:
		return fmt.Errorf("%d bytes: must be at most %d bytes", len(p), MaxPrefixBytes)
	}
	return nil
}
