package capool_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/pki/capool"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, bad := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(good, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pool, err := capool.Load(good); err != nil || pool == nil {
		t.Fatalf("Load(ca.pem) = %v, %v", pool, err)
	}
	if _, err := capool.Load(bad); !errors.Is(err, capool.ErrNoCertificate) {
		t.Errorf("Load(bad.pem) = %v, want ErrNoCertificate", err)
	}
	missing := filepath.Join(dir, "missing.pem")
	if _, err := capool.Load(missing); !errors.Is(err, fs.ErrNotExist) || err.Error() != "no such file or directory" {
		t.Errorf("Load(missing) = %v, want ErrNotExist without the path", err)
	}
}
