package app

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/devcluster"
	"github.com/talonhq/talon/internal/pki"
)

// clientTLS is how `talon get` and `talon bench` find their credential:
// explicit files, or a `talon dev` directory.
type clientTLS struct {
	dir                       string
	caFile, certFile, keyFile string
	denyFile                  string
	insecure                  bool
}

func (c *clientTLS) register(f *pflag.FlagSet) {
	f.StringVar(&c.dir, "dir", "", "a `talon dev` directory: use its client credential and control address")
	f.StringVar(&c.caFile, "tls-ca-file", "", "CA bundle the coordinators' and workers' certificates chain to (env TALON_TLS_CA_FILE)")
	f.StringVar(&c.certFile, "tls-cert-file", "", "client certificate (OU=client) (env TALON_TLS_CERT_FILE)")
	f.StringVar(&c.keyFile, "tls-key-file", "", "key of --tls-cert-file (env TALON_TLS_KEY_FILE)")
	f.StringVar(&c.denyFile, "tls-deny-file", "", "deny list of revoked credentials (serial:<hex>, node:<node-id> or <role>/<node-id> per line): a worker or coordinator whose certificate is on it is refused, as the cluster's own processes refuse it (env TALON_TLS_DENY_FILE)")
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
	env(&c.denyFile, "tls-deny-file", "TALON_TLS_DENY_FILE")
	if !f.Changed("insecure-control-plane") && lookupEnv(environ, "TALON_INSECURE_CONTROL_PLANE") == "true" {
		c.insecure = true
	}
	var coordinators []string
	if c.dir != "" {
		if c.caFile != "" || c.certFile != "" || c.keyFile != "" {
			return nil, nil, &usageError{fmt.Errorf("--dir %q and --tls-*-file: give one or the other", c.dir)}
		}
		files := devcluster.ClientFiles(c.dir)
		c.caFile, c.certFile, c.keyFile = files.CAFile, files.CertFile, files.KeyFile
		var err error
		if coordinators, err = devcluster.Coordinators(c.dir); err != nil {
			return nil, nil, &usageError{fmt.Errorf("--dir %q: not a running `talon dev` directory: %w", c.dir, err)}
		}
	}
	switch {
	case c.insecure && c.certFile != "":
		return nil, nil, &usageError{errors.New("--insecure-control-plane and TLS files: give one or the other")}
	case c.insecure:
		return nil, coordinators, nil
	case c.caFile == "" || c.certFile == "" || c.keyFile == "":
		return nil, nil, &usageError{fmt.Errorf("--tls-ca-file %q, --tls-cert-file %q, --tls-key-file %q: the cluster's control and data ports need a client credential; give all three, --dir of a `talon dev` cluster, or --insecure-control-plane for a cluster without TLS", c.caFile, c.certFile, c.keyFile)}
	}
	src, err := pki.Load(pki.Files{CAFile: c.caFile, CertFile: c.certFile, KeyFile: c.keyFile, DenyFile: c.denyFile}, pki.Options{Setting: "tls"})
	if err != nil {
		return nil, nil, &usageError{err}
	}
	return src, coordinators, nil
}
