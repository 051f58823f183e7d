package pki

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"strings"

	"github.com/talonhq/talon/internal/cluster"
)

// MaxDenyFileBytes bounds a deny list file.
const MaxDenyFileBytes = 1 << 20

// denyList is a parsed deny list: certificate serial numbers and
// identities that no listener or dialler accepts, whatever the chain.
type denyList struct {
	serials map[string]bool // lower-case hex, no leading zeros
	nodes   map[string]bool // node ID: every role
	ids     map[string]bool // "role/node-id"
}

// DenyEntry forms, one per line ("#" starts a comment):
//
//	serial:<hex>         a certificate's serial number (as openssl and
//	                     `talon pki issue` print it; colons allowed)
//	node:<node-id>       every certificate naming the node, any role
//	<role>/<node-id>     every certificate naming that identity
func parseDenyList(path string) (*denyList, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: must be a regular file", path)
	case fi.Size() > MaxDenyFileBytes:
		return nil, fmt.Errorf("%s: %d bytes: must be at most %d", path, fi.Size(), MaxDenyFileBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &denyList{serials: map[string]bool{}, nodes: map[string]bool{}, ids: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		switch kind, val, _ := strings.Cut(line, ":"); {
		case kind == "serial":
			s, ok := new(big.Int).SetString(strings.ReplaceAll(strings.TrimSpace(val), ":", ""), 16)
			if !ok {
				return nil, fmt.Errorf("%s:%d: serial %q: must be hexadecimal", path, n, val)
			}
			d.serials[s.Text(16)] = true
		case kind == "node":
			node := strings.TrimSpace(val)
			if err := cluster.ValidateID(fmt.Sprintf("%s:%d: node", path, n), node); err != nil {
				return nil, err
			}
			d.nodes[node] = true
		default:
			role, node, ok := strings.Cut(line, "/")
			if !ok || !validRole(Role(role)) {
				return nil, fmt.Errorf("%s:%d: %q: want serial:<hex>, node:<node-id> or <role>/<node-id> (role coordinator, worker or client)", path, n, line)
			}
			if err := cluster.ValidateID(fmt.Sprintf("%s:%d: node", path, n), node); err != nil {
				return nil, err
			}
			d.ids[role+"/"+node] = true
		}
	}
	return d, sc.Err()
}

func validRole(r Role) bool {
	for _, x := range Roles {
		if x == r {
			return true
		}
	}
	return false
}

// deniesRecord is denies for a record's identity and certificate serial
// (lower-case hex, "" when unknown).
func (d *denyList) deniesRecord(id Identity, serialHex string) (string, bool) {
	switch {
	case serialHex != "" && d.serials[serialHex]:
		return "serial:" + serialHex, true
	case d.nodes[id.NodeID]:
		return "node:" + id.NodeID, true
	case d.ids[id.String()]:
		return id.String(), true
	}
	return "", false
}

// denies reports whether the list refuses cert, which names id, and why.
func (d *denyList) denies(cert *x509.Certificate, id Identity) (string, bool) {
	if d == nil {
		return "", false
	}
	if cert.SerialNumber != nil && d.serials[cert.SerialNumber.Text(16)] {
		return "serial:" + cert.SerialNumber.Text(16), true
	}
	if d.nodes[id.NodeID] {
		return "node:" + id.NodeID, true
	}
	if d.ids[id.String()] {
		return id.String(), true
	}
	return "", false
}
