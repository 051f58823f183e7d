package testsupport

import (
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
)

// PKISource issues a one-hour certificate for id from ca, writes it under
// dir in the pki.Layout, and loads it as a pki.Source.
func PKISource(tb testing.TB, ca *pki.CA, dir string, id pki.Identity) *pki.Source {
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
