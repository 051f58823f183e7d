package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
)

// preflight runs the checks of a process's start that need no network:
// the control-plane credential loaded, matched with its key and bound to
// this process (cluster, role, node), the admin listener's certificate and
// key, and for a worker its blob store (a file:// directory that exists,
// the URL parameters of the others). Start-up runs it first and `talon
// config validate` runs it too, so validate fails, with the same message
// and exit code, wherever start-up would fail before it reaches the
// network. Errors are usage errors.
func preflight(cfg *config.Config) error {
	if _, err := loadPlaneTLS(cfg, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	if a := cfg.Admin; a.TLSCertFile != "" || a.TLSKeyFile != "" {
		if _, err := pki.Load(pki.Files{CertFile: a.TLSCertFile, KeyFile: a.TLSKeyFile}, pki.Options{Setting: "admin-tls"}); err != nil {
			return &usageError{err}
		}
	}
	if cfg.Role == cluster.RoleWorker {
		if f := cfg.Attestation.TokenFile; f != "" {
			if _, err := readToken(f); err != nil {
				return &usageError{err}
			}
		}
		return checkBlobStore(cfg.BlobStore)
	}
	return nil
}

// checkBlobStore refuses a blob-store setting the worker could not open:
// a file:// directory that is missing, a URL the backend refuses.
func checkBlobStore(s string) error {
	if u, err := url.Parse(s); err == nil && u.Scheme == "file" {
		if fi, err := os.Stat(u.Path); err != nil || !fi.IsDir() {
			return &usageError{fmt.Errorf("blob-store %q: directory %s does not exist or is not a directory: create it, or point blob-store at the directory that holds the objects", config.RedactURL(s), u.Path)}
		}
	}
	bs, err := openBlobStore(s)
	if errors.Is(err, blob.ErrInvalidURL) {
		return &usageError{fmt.Errorf("blob-store: %w", err)}
	}
	if err != nil {
		return fmt.Errorf("blob-store: %w", err)
	}
	if c, ok := bs.(interface{ Close() error }); ok {
		_ = c.Close()
	}
	return nil
}
