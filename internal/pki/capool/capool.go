// Package capool turns a CA file (PEM) into a certificate pool: the one
// helper behind every ca-file setting (TLS credentials, talonctl, the
// readiness probe, the OTLP exporter, the S3 store's ca_file). It imports
// only the standard library, so that talonctl may link it.
package capool

import (
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
)

// ErrNoCertificate: the file or bytes hold no PEM certificate.
var ErrNoCertificate = errors.New("holds no PEM certificate")

// Load reads the PEM file at path into a new pool. The error says what is
// wrong (the file cannot be read, or ErrNoCertificate) without the path:
// the caller names the setting and the file.
func Load(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	return FromPEM(pem)
}

// FromPEM returns a new pool of the certificates in pem, or
// ErrNoCertificate when it holds none.
func FromPEM(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, ErrNoCertificate
	}
	return pool, nil
}
