package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
)

// Validity limits of `talon pki`.
const (
	maxCAValidity   = 20 * 365 * 24 * time.Hour
	maxCertValidity = 5 * 365 * 24 * time.Hour
)

func newPKICmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Issue the certificates of a cluster without a PKI of its own",
		Long: `pki is a small certificate authority for Talon's mutual TLS, for clusters
without a PKI of their own (with one, issue certificates there: CN is the node
ID, OU the role, with client and server key usage).

  talon pki init --dir /etc/talon/pki
  talon pki issue --dir /etc/talon/pki --role coordinator --node-id coord-1
  talon pki issue --dir /etc/talon/pki --role worker --node-id worker-1
  talon pki issue --dir /etc/talon/pki --role client --node-id ops

Each credential is written to DIR/ROLE-NODE.crt and .key beside DIR/ca.crt;
point tls-ca-file, tls-cert-file and tls-key-file at them. Issue again before
the certificate expires and replace the files: processes reload them without a
restart. Keep ca.key off the machines that run Talon.`,
	}
	var dir string
	var caValidity time.Duration
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create a CA (ca.crt, ca.key) in --dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return &usageError{errors.New("--dir: required")}
			}
			if caValidity <= 0 || caValidity > maxCAValidity {
				return &usageError{fmt.Errorf("--validity %s: must be positive and at most %s", caValidity, maxCAValidity)}
			}
			if _, err := os.Stat(filepath.Join(dir, pki.CAKeyFile)); err == nil {
				return &usageError{fmt.Errorf("--dir %q already holds %s: refusing to replace a CA (every certificate it issued would stop verifying)", dir, pki.CAKeyFile)}
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			ca, err := pki.NewCA("Talon CA", caValidity, nil)
			if err != nil {
				return err
			}
			if err := ca.Write(dir); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s (valid until %s)\n", filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
			return nil
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", "", "directory for ca.crt and ca.key (created, mode 0700)")
	initCmd.Flags().DurationVar(&caValidity, "validity", 10*365*24*time.Hour, "how long the CA is valid")

	var role, node, clusterID string
	var hosts []string
	var validity time.Duration
	issueCmd := &cobra.Command{
		Use:   "issue",
		Short: "Issue the certificate of one process or client",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return &usageError{errors.New("--dir: required")}
			}
			r := pki.Role(role)
			if r != pki.RoleCoordinator && r != pki.RoleWorker && r != pki.RoleClient {
				return &usageError{fmt.Errorf("--role %q: must be coordinator, worker or client", role)}
			}
			if err := cluster.ValidateID("--node-id", node); err != nil {
				return &usageError{err}
			}
			if clusterID == "" {
				return &usageError{errors.New("--cluster-id: required: a certificate is bound to one cluster (the --cluster-id of the processes that use it), and processes of other clusters refuse it")}
			}
			if err := cluster.ValidateID("--cluster-id", clusterID); err != nil {
				return &usageError{err}
			}
			if validity <= 0 || validity > maxCertValidity {
				return &usageError{fmt.Errorf("--validity %s: must be positive and at most %s", validity, maxCertValidity)}
			}
			ca, err := pki.LoadCA(dir)
			if err != nil {
				return &usageError{fmt.Errorf("--dir %q: no CA (run talon pki init first): %w", dir, err)}
			}
			id := pki.Identity{Role: r, NodeID: node, Cluster: clusterID}
			is, err := ca.Issue(id, hosts, validity)
			if err != nil {
				return err
			}
			f := pki.Layout(dir, id)
			if err := is.WriteFiles(f.CertFile, f.KeyFile); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tls-ca-file: %s\ntls-cert-file: %s\ntls-key-file: %s\nserial: %s (for tls-deny-file: serial:%s)\nnot-after: %s\n",
				f.CAFile, f.CertFile, f.KeyFile, is.Serial(), is.Serial(), is.NotAfter().UTC().Format(time.RFC3339))
			return nil
		},
	}
	issueCmd.Flags().StringVar(&dir, "dir", "", "directory of the CA (from talon pki init)")
	issueCmd.Flags().StringVar(&role, "role", "", "coordinator, worker or client")
	issueCmd.Flags().StringVar(&node, "node-id", "", "node ID of the process (a client's name for a client)")
	issueCmd.Flags().StringVar(&clusterID, "cluster-id", "", "cluster the certificate is bound to (required; its SPIFFE ID is spiffe://talon/talon/CLUSTER/ROLE/NODE)")
	issueCmd.Flags().StringSliceVar(&hosts, "host", nil, "DNS names or IP addresses for the subject alternative names (for tools that check host names; Talon checks identities)")
	issueCmd.Flags().DurationVar(&validity, "validity", 30*24*time.Hour, "how long the certificate is valid (short, so a leaked one expires soon: re-issue and replace the files before it does; processes reload them without a restart)")
	cmd.AddCommand(initCmd, issueCmd)
	_ = env
	return cmd
}
