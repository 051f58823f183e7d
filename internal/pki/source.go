package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki/capool"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCheckInterval is how often a Source looks at its files.
const DefaultCheckInterval = time.Second

// MinVersion is the lowest TLS version any Talon listener or client speaks.
const MinVersion = tls.VersionTLS12

// CipherSuites are the TLS 1.2 suites Talon allows: ECDHE with AEADs only.
// TLS 1.3 suites are all AEADs and not configurable.
var CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Harden sets the minimum version and suites on cfg and returns it.
func Harden(cfg *tls.Config) *tls.Config {
	cfg.MinVersion = MinVersion
	cfg.CipherSuites = CipherSuites
	return cfg
}

// Files names the PEM files of a credential. CAFile may be empty for a
// server-only credential (the admin listener), which then verifies no
// peer.
type Files struct {
	CAFile   string
	CertFile string
	KeyFile  string
	// DenyFile, when set, is a deny list (see parseDenyList) that every
	// peer's certificate is checked against; reloaded on change like the
	// rest.
	DenyFile string
}

// Options configure a Source.
type Options struct {
	// Setting prefixes the file settings in errors ("tls" gives
	// "tls-cert-file"); default "tls".
	Setting string
	// CheckInterval bounds how often the files are looked at; default
	// DefaultCheckInterval.
	CheckInterval time.Duration
	// ClusterID binds the Source to a cluster: its own certificate must
	// name it (a reload that names another is refused) and so must every
	// peer's. Empty: the cluster the own certificate names, if any (a
	// client's credential then talks to its cluster only).
	ClusterID string
	Logger    *slog.Logger
	Clock     func() time.Time
}

// material is one consistent load of the files.
type material struct {
	cert  *tls.Certificate
	id    Identity // zero when the certificate names none (admin)
	idErr error
	pool  *x509.CertPool // nil without a CA file
	deny  *denyList      // nil without a deny file
	stamp Stamps
}

// Stamps are what a reload check compares: each file's size and
// modification time. A Source and the admin token file (package admin)
// reload when they differ.
type Stamps []fileStamp

type fileStamp struct {
	size int64
	mod  time.Time
}

// Source holds reloadable TLS material. Create it with Load.
type Source struct {
	files Files
	opts  Options
	// cluster is the cluster every peer must name; "" checks none (a
	// certificate issued without a cluster, used without ClusterID).
	cluster string

	cur     atomic.Pointer[material]
	reloads atomic.Uint64
	fails   atomic.Uint64

	mu        sync.Mutex // guards the fields below; serialises reloads
	lastCheck time.Time
	lastErr   string // the last reload failure logged

	denials    atomic.Uint64
	deniedMu   sync.Mutex      // guards deniedSeen
	deniedSeen map[string]bool // identities whose refusal was logged
}

// Denied reports whether cert, a verified peer's leaf, is on the current
// deny list (reloaded when due): for connections established before the
// entry was added, which the handshake check no longer sees.
func (s *Source) Denied(cert *x509.Certificate) bool {
	m := s.current()
	if m.deny == nil || cert == nil {
		return false
	}
	id, err := IdentityOf(cert)
	if err != nil {
		return false
	}
	entry, denied := m.deny.denies(cert, id)
	if denied {
		s.noteDenied(id, cert, entry)
	}
	return denied
}

// DeniesRecord reports whether the current deny list refuses the
// credential a status record names: its role and node ID, and the serial
// number (lower-case hex, "" when unknown) of the certificate it
// registered with; and which entry. A coordinator uses it to revoke a
// worker in the store for every coordinator, including those the worker
// never talks to.
func (s *Source) DeniesRecord(role cluster.Role, nodeID, serialHex string) (string, bool) {
	m := s.current()
	if m.deny == nil {
		return "", false
	}
	return m.deny.deniesRecord(Identity{Role: Role(role), NodeID: nodeID}, serialHex)
}

// Denials counts peers refused by the deny list (handshakes and
// established connections).
func (s *Source) Denials() uint64 { return s.denials.Load() }

// noteDenied counts a refusal and logs the first for each identity.
func (s *Source) noteDenied(id Identity, cert *x509.Certificate, entry string) {
	s.denials.Add(1)
	key := id.String() + "/" + cert.SerialNumber.Text(16)
	s.deniedMu.Lock()
	if s.deniedSeen == nil {
		s.deniedSeen = map[string]bool{}
	}
	first := !s.deniedSeen[key]
	if first && len(s.deniedSeen) < 10000 {
		s.deniedSeen[key] = true
	}
	s.deniedMu.Unlock()
	if first {
		s.opts.Logger.Warn("refused a peer on the deny list (logged once per certificate)", "peer", id.String(), "serial", cert.SerialNumber.Text(16), "entry", entry)
	}
}

// Load reads the files once. An error names the setting and file at fault.
func Load(files Files, opts Options) (*Source, error) {
	if opts.Setting == "" {
		opts.Setting = "tls"
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, fmt.Errorf("%s-cert-file %q and %s-key-file %q: both are required", opts.Setting, files.CertFile, opts.Setting, files.KeyFile)
	}
	s := &Source{files: files, opts: opts}
	m, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	s.lastCheck = opts.Clock()
	s.cluster = opts.ClusterID
	if s.cluster == "" && m.idErr == nil {
		s.cluster = m.id.Cluster
	}
	return s, nil
}

func (s *Source) paths() []string {
	p := []string{s.files.CertFile, s.files.KeyFile}
	if s.files.CAFile != "" {
		p = append(p, s.files.CAFile)
	}
	if s.files.DenyFile != "" {
		p = append(p, s.files.DenyFile)
	}
	return p
}

// StampFiles stats paths.
func StampFiles(paths ...string) (Stamps, error) {
	out := make(Stamps, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = fileStamp{size: fi.Size(), mod: fi.ModTime()}
	}
	return out, nil
}

func (s *Source) load() (*material, error) {
	st, err := StampFiles(s.paths()...)
	if err != nil {
		return nil, err
	}
	set := s.opts.Setting
	certPEM, err := os.ReadFile(s.files.CertFile)
	if err != nil {
		return nil, fmt.Errorf("%s-cert-file: %w", set, err)
	}
	keyPEM, err := os.ReadFile(s.files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s-key-file: %w", set, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s-cert-file %q, %s-key-file %q: %w", set, s.files.CertFile, set, s.files.KeyFile, err)
	}
	m := &material{cert: &pair, stamp: st}
	m.id, m.idErr = IdentityOf(pair.Leaf)
	if want := s.opts.ClusterID; want != "" && m.idErr == nil && m.id.Cluster != want {
		if m.id.Cluster == "" {
			return nil, fmt.Errorf("%s-cert-file %q names no cluster: this process serves cluster %q; issue it again with talon pki issue --cluster-id %s (it then carries the SPIFFE ID spiffe://%s/talon/%s/%s/%s)", set, s.files.CertFile, want, want, TrustDomain, want, m.id.Role, m.id.NodeID)
		}
		return nil, fmt.Errorf("%s-cert-file %q is bound to cluster %q, but this process serves cluster %q", set, s.files.CertFile, m.id.Cluster, want)
	}
	if s.files.DenyFile != "" {
		if m.deny, err = parseDenyList(s.files.DenyFile); err != nil {
			return nil, fmt.Errorf("%s-deny-file: %w", set, err)
		}
	}
	if s.files.CAFile != "" {
		if m.pool, err = capool.Load(s.files.CAFile); err != nil {
			return nil, fmt.Errorf("%s-ca-file %q: %w", set, s.files.CAFile, err)
		}
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: m.pool, Intermediates: intermediates(pair.Certificate), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: s.opts.Clock()}); err != nil {
			return nil, fmt.Errorf("%s-cert-file %q is not valid under %s-ca-file %q: %w", set, s.files.CertFile, set, s.files.CAFile, err)
		}
	}
	return m, nil
}

func intermediates(chain [][]byte) *x509.CertPool {
	if len(chain) < 2 {
		return nil
	}
	p := x509.NewCertPool()
	for _, der := range chain[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			p.AddCert(c)
		}
	}
	return p
}

// current returns the material in use, first reloading it when a check is
// due and a file changed.
func (s *Source) current() *material {
	m := s.cur.Load()
	now := s.opts.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastCheck) < s.opts.CheckInterval {
		return m
	}
	s.lastCheck = now
	st, err := StampFiles(s.paths()...)
	if err == nil && st.Equal(m.stamp) {
		return m
	}
	nm, err := s.load()
	if err != nil {
		s.fails.Add(1)
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			s.opts.Logger.Warn("tls files changed but do not load; keeping the previous certificate", "error", err)
		}
		return m
	}
	if m.id != nm.id && nm.idErr == nil && m.idErr == nil {
		s.opts.Logger.Warn("reloaded certificate names a different identity", "was", m.id.String(), "now", nm.id.String())
	}
	s.lastErr = ""
	s.cur.Store(nm)
	s.reloads.Add(1)
	s.opts.Logger.Info("tls certificate reloaded", "cert", s.files.CertFile, "notAfter", nm.cert.Leaf.NotAfter)
	return nm
}

// Equal reports whether a and b stamp the same files alike.
func (a Stamps) Equal(b Stamps) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].size != b[i].size || !a[i].mod.Equal(b[i].mod) {
			return false
		}
	}
	return true
}

// Identity returns the identity the current certificate names.
func (s *Source) Identity() (Identity, error) {
	m := s.current()
	return m.id, m.idErr
}

// Certificate returns the certificate in use.
func (s *Source) Certificate() *tls.Certificate { return s.current().cert }

// Reloads counts successful reloads; ReloadFailures counts changes that
// did not load.
func (s *Source) Reloads() uint64        { return s.reloads.Load() }
func (s *Source) ReloadFailures() uint64 { return s.fails.Load() }

// ServerConfig returns the configuration of a listener. With a CA file, the
// peer must present a certificate that chains to it and names an identity
// accepted by expect; without one, no client certificate is asked for.
func (s *Source) ServerConfig(expect Expect) *tls.Config {
	cfg := Harden(&tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.current().cert, nil },
	})
	if s.files.CAFile != "" {
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			_, err := s.verifyPeer(cs, x509.ExtKeyUsageClientAuth, expect)
			return err
		}
	}
	return cfg
}

// ClientConfig returns the configuration of a dialler: it presents this
// Source's certificate and accepts a server that chains to the CA and
// names an identity accepted by expect. It keeps a session cache, so
// reconnections resume. It needs a CA file.
func (s *Source) ClientConfig(expect Expect) *tls.Config {
	return Harden(&tls.Config{
		// The chain and identity are checked in VerifyConnection, against
		// the current CA: host names are not identities here.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.current().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := s.verifyPeer(cs, x509.ExtKeyUsageServerAuth, expect)
			return err
		},
		ClientSessionCache: tls.NewLRUClientSessionCache(256),
	})
}

// verifyPeer checks the peer's chain against the current CA and its
// identity against expect.
func (s *Source) verifyPeer(cs tls.ConnectionState, usage x509.ExtKeyUsage, expect Expect) (Identity, error) {
	m := s.current()
	if m.pool == nil {
		return Identity{}, errors.New("tls: no CA configured to verify the peer")
	}
	if len(cs.PeerCertificates) == 0 {
		return Identity{}, fmt.Errorf("%w: peer presented no certificate", ErrIdentity)
	}
	leaf := cs.PeerCertificates[0]
	var inter *x509.CertPool
	if len(cs.PeerCertificates) > 1 {
		inter = x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: s.opts.Clock()}); err != nil {
		return Identity{}, fmt.Errorf("peer certificate %q: %w", leaf.Subject, err)
	}
	id, err := IdentityOf(leaf)
	if err != nil {
		return Identity{}, err
	}
	if entry, denied := m.deny.denies(leaf, id); denied {
		s.noteDenied(id, leaf, entry)
		return Identity{}, fmt.Errorf("%w: peer %s (serial %s) is on the deny list (%s)", ErrIdentity, id, leaf.SerialNumber.Text(16), entry)
	}
	if s.cluster != "" && id.Cluster != s.cluster {
		if id.Cluster == "" {
			return Identity{}, fmt.Errorf("%w: peer %s names no cluster; this process serves cluster %q (certificates are bound to a cluster: talon pki issue --cluster-id)", ErrIdentity, id, s.cluster)
		}
		return Identity{}, fmt.Errorf("%w: peer %s is bound to cluster %q; this process serves cluster %q", ErrIdentity, id, id.Cluster, s.cluster)
	}
	return id, expect.Check(id)
}

// PeerIdentity returns the identity of a verified connection's peer.
func PeerIdentity(cs *tls.ConnectionState) (Identity, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return Identity{}, fmt.Errorf("%w: peer presented no certificate", ErrIdentity)
	}
	return IdentityOf(cs.PeerCertificates[0])
}

// SameCertificate reports whether a and b are the same DER certificate.
func SameCertificate(a, b *x509.Certificate) bool { return bytes.Equal(a.Raw, b.Raw) }
