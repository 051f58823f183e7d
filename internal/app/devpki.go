package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
)

// Files of a `talon dev` directory besides blobs and caches.
const (
	devTLSDir           = "tls"          // the throwaway CA and every credential
	devCoordinatorsFile = "coordinators" // the control address, one per line
	devClientID         = "dev"          // node ID of the client credential
	devAdminTokenFile   = "admin-token"  // with --admin-auth
	devCertValidity     = 30 * 24 * time.Hour
)

// devPKI returns the CA of a dev directory, creating it when absent (a
// --dir reused across runs keeps its CA, so credentials stay valid).
func devPKI(dir string) (*pki.CA, error) {
	tdir := filepath.Join(dir, devTLSDir)
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

// devCredential issues (again, each run) the credential of id in a dev
// directory and returns its files.
func devCredential(ca *pki.CA, dir string, id pki.Identity, hosts []string) (pki.Files, error) {
	f := pki.Layout(filepath.Join(dir, devTLSDir), id)
	is, err := ca.Issue(id, hosts, devCertValidity)
	if err != nil {
		return pki.Files{}, err
	}
	return f, is.WriteFiles(f.CertFile, f.KeyFile)
}

// clientTLS is how `talon get` and `talon bench` find their credential:
// explicit files, or a `talon dev` directory.
type clientTLS struct {
	dir                       string
	caFile, certFile, keyFile string
	insecure                  bool
}

func (c *clientTLS) register(f *pflag.FlagSet) {
	f.StringVar(&c.dir, "dir", "", "a `talon dev` directory: use its client credential and control address")
	f.StringVar(&c.caFile, "tls-ca-file", "", "CA bundle the coordinators' and workers' certificates chain to (env TALON_TLS_CA_FILE)")
	f.StringVar(&c.certFile, "tls-cert-file", "", "client certificate (OU=client) (env TALON_TLS_CERT_FILE)")
	f.StringVar(&c.keyFile, "tls-key-file", "", "key of --tls-cert-file (env TALON_TLS_KEY_FILE)")
	f.BoolVar(&c.insecure, "insecure-control-plane", false, "talk to a cluster that runs without TLS (env TALON_INSECURE_CONTROL_PLANE)")
}

// resolve fills unset values from the environment and --dir, and returns
// the credential (nil for an insecure cluster) and, from --dir, the
// coordinators.
func (c *clientTLS) resolve(f *pflag.FlagSet, environ []string) (*pki.Source, []string, error) {
	env := func(flag *string, name, key string) {
		if !f.Changed(name) {
			if v := lookupEnv(environ, key); v != "" {
				*flag = v
			}
		}
	}
	env(&c.caFile, "tls-ca-file", "TALON_TLS_CA_FILE")
	env(&c.certFile, "tls-cert-file", "TALON_TLS_CERT_FILE")
	env(&c.keyFile, "tls-key-file", "TALON_TLS_KEY_FILE")
	if !f.Changed("insecure-control-plane") && lookupEnv(environ, "TALON_INSECURE_CONTROL_PLANE") == "true" {
		c.insecure = true
	}
	var coordinators []string
	if c.dir != "" {
		if c.caFile != "" || c.certFile != "" || c.keyFile != "" {
			return nil, nil, &usageError{fmt.Errorf("--dir %q and --tls-*-file: give one or the other", c.dir)}
		}
		files := pki.Layout(filepath.Join(c.dir, devTLSDir), pki.Identity{Role: pki.RoleClient, NodeID: devClientID})
		c.caFile, c.certFile, c.keyFile = files.CAFile, files.CertFile, files.KeyFile
		b, err := os.ReadFile(filepath.Join(c.dir, devCoordinatorsFile))
		if err != nil {
			return nil, nil, &usageError{fmt.Errorf("--dir %q: not a running `talon dev` directory: %w", c.dir, err)}
		}
		coordinators = strings.Fields(string(b))
	}
	switch {
	case c.insecure && c.certFile != "":
		return nil, nil, &usageError{errors.New("--insecure-control-plane and TLS files: give one or the other")}
	case c.insecure:
		return nil, coordinators, nil
	case c.caFile == "" || c.certFile == "" || c.keyFile == "":
		return nil, nil, &usageError{fmt.Errorf("--tls-ca-file %q, --tls-cert-file %q, --tls-key-file %q: the cluster's control and data ports need a client credential; give all three, --dir of a `talon dev` cluster, or --insecure-control-plane for a cluster without TLS", c.caFile, c.certFile, c.keyFile)}
	}
	src, err := pki.Load(pki.Files{CAFile: c.caFile, CertFile: c.certFile, KeyFile: c.keyFile}, pki.Options{})
	if err != nil {
		return nil, nil, &usageError{err}
	}
	return src, coordinators, nil
}

// joinDev issues a worker joining a `talon dev` cluster its credential
// from the dev CA in cfg.DevDir and points cfg's TLS settings at it.
func joinDev(cfg *config.Config) error {
	ca, err := pki.LoadCA(filepath.Join(cfg.DevDir, devTLSDir))
	if err != nil {
		return fmt.Errorf("dev-dir %q: not a `talon dev` directory: %w", cfg.DevDir, err)
	}
	f, err := devCredential(ca, cfg.DevDir, pki.Identity{Role: pki.Role(cfg.Role), NodeID: cfg.NodeID}, []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	cfg.TLS = config.TLSConfig{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
	return nil
}
