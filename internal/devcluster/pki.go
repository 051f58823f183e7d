package devcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
)

// Files of a dev directory besides blobs and caches.
const (
	TLSDir           = "tls"          // the throwaway CA and every credential
	CoordinatorsFile = "coordinators" // the control address, one per line
	ClientID         = "dev"          // node ID of the client credential
	AdminTokenFile   = "admin-token"  // with Options.AdminAuth
	certValidity     = 30 * 24 * time.Hour
)

// loadCA returns the CA of a dev directory, creating it when absent (a
// --dir reused across runs keeps its CA, so credentials stay valid).
func loadCA(dir string) (*pki.CA, error) {
	tdir := filepath.Join(dir, TLSDir)
	ca, err := pki.LoadCA(tdir)
	if err == nil {
		return ca, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dev CA in %s: %w", tdir, err)
	}
	ca, err = pki.NewCA("talon dev CA", 365*24*time.Hour, nil)
	if err != nil {
		return nil, err
	}
	return ca, ca.Write(tdir)
}

// credential issues (again, each run) the credential of id in a dev
// directory and returns its files.
func credential(ca *pki.CA, dir string, id pki.Identity, hosts []string) (pki.Files, error) {
	f := pki.Layout(filepath.Join(dir, TLSDir), id)
	is, err := ca.Issue(id, hosts, certValidity)
	if err != nil {
		return pki.Files{}, err
	}
	return f, is.WriteFiles(f.CertFile, f.KeyFile)
}

// ClientFiles returns the files of the client credential of dev directory
// dir.
func ClientFiles(dir string) pki.Files {
	return pki.Layout(filepath.Join(dir, TLSDir), pki.Identity{Role: pki.RoleClient, NodeID: ClientID})
}

// Coordinators returns the control addresses a running dev cluster wrote
// into dir.
func Coordinators(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, CoordinatorsFile))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// Join issues a process joining the dev cluster of cfg.DevDir (`talon
// worker --dev-dir`) its credential from the dev CA and points cfg's TLS
// settings at it.
func Join(cfg *config.Config) error {
	ca, err := pki.LoadCA(filepath.Join(cfg.DevDir, TLSDir))
	if err != nil {
		return fmt.Errorf("dev-dir %q: not a `talon dev` directory: %w", cfg.DevDir, err)
	}
	f, err := credential(ca, cfg.DevDir, pki.Identity{Role: pki.Role(cfg.Role), NodeID: cfg.NodeID, Cluster: cfg.ClusterID}, []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	cfg.TLS = config.TLSConfig{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
	return nil
}
