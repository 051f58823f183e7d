package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// CA file names in a directory written by WriteCA and Issue.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// CA is a certificate authority that issues Talon credentials: ECDSA
// P-256 keys, certificates naming one identity.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	now  func() time.Time
}

// NewCA creates a self-signed CA valid for validity.
func NewCA(name string, validity time.Duration, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Talon"}},
		NotBefore:             t.Add(-time.Minute),
		NotAfter:              t.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, now: now}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}

// LoadCA reads ca.crt and ca.key from dir.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("ca in %s: %s or %s is not PEM", dir, CACertFile, CAKeyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CACertFile), err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CAKeyFile), err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s: not a CA certificate", filepath.Join(dir, CACertFile))
	}
	return &CA{Cert: cert, Key: key, now: time.Now}, nil
}

// Write writes ca.crt (0644) and ca.key (0600) into dir, creating it.
func (ca *CA) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(ca.Key)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, CACertFile), ca.CertPEM(), 0o644)
}

// CertPEM returns the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Issued is a certificate and its key in PEM.
type Issued struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Issue returns a certificate for id valid for validity. hosts (DNS names
// or IP addresses) go into the subject alternative names, for tools that
// verify host names; Talon itself verifies identities. Coordinators and
// workers get both server and client usage (they listen and dial);
// clients get client usage.
func (ca *CA) Issue(id Identity, hosts []string, validity time.Duration) (*Issued, error) {
	if !slices.Contains(Roles, id.Role) {
		return nil, fmt.Errorf("role %q: must be one of %v", id.Role, Roles)
	}
	if id.NodeID == "" {
		return nil, errors.New("node ID: must not be empty")
	}
	if id.Cluster != "" {
		if err := cluster.ValidateID("cluster ID", id.Cluster); err != nil {
			return nil, err
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	t := ca.now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: id.NodeID, OrganizationalUnit: []string{string(id.Role)}, Organization: []string{"Talon"}},
		NotBefore:    t.Add(-time.Minute),
		NotAfter:     t.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if id.Role != RoleClient {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if id.Cluster != "" {
		tmpl.URIs = []*url.URL{id.URI()}
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Serial returns the certificate's serial number in hexadecimal, the form
// a tls-deny-file entry takes.
func (is *Issued) Serial() string {
	c, err := is.parse()
	if err != nil {
		return ""
	}
	return c.SerialNumber.Text(16)
}

// NotAfter returns when the certificate expires.
func (is *Issued) NotAfter() time.Time {
	c, err := is.parse()
	if err != nil {
		return time.Time{}
	}
	return c.NotAfter
}

func (is *Issued) parse() (*x509.Certificate, error) {
	b, _ := pem.Decode(is.CertPEM)
	if b == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// WriteFiles writes the certificate and key to certFile (0644) and keyFile
// (0600), each through a temporary file and a rename so a reader never sees
// half a file.
func (is *Issued) WriteFiles(certFile, keyFile string) error {
	if err := writeFile(keyFile, is.KeyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(certFile, is.CertPEM, 0o644)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Layout is where a directory managed by `talon dev` or `talon pki` keeps
// the files of one identity: <dir>/<role>-<node-id>.crt and .key, beside
// ca.crt.
func Layout(dir string, id Identity) Files {
	base := filepath.Join(dir, string(id.Role)+"-"+id.NodeID)
	return Files{CAFile: filepath.Join(dir, CACertFile), CertFile: base + ".crt", KeyFile: base + ".key"}
}
