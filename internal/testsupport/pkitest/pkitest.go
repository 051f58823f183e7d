// Package pkitest issues test credentials with package pki (apart from
// testsupport, which pki's own tests import).
package pkitest

import (
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
)

// Source issues a one-hour certificate for id from ca, writes it under
// dir in the pki.Layout, and loads it as a pki.Source.
func Source(tb testing.TB, ca *pki.CA, dir string, id pki.Identity) *pki.Source {
	tb.Helper()
	is, err := ca.Issue(id, nil, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	f := pki.Layout(dir, id)
	if err := is.WriteFiles(f.CertFile, f.KeyFile); err != nil {
		tb.Fatal(err)
	}
	s, err := pki.Load(f, pki.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
