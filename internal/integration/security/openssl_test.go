package security

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// opensslBin returns the openssl command (TALON_OPENSSL, set by make test
// from .ci/ensure-tool.sh, or PATH).
func opensslBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TALON_OPENSSL"); p != "" {
		return p
	}
	p, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl not found: run make test (it installs it) or set TALON_OPENSSL")
	}
	return p
}

// sClient runs openssl s_client against addr with args and reports whether
// a handshake completed, with the output.
func sClient(t *testing.T, addr string, args ...string) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, opensslBin(t), append([]string{"s_client", "-connect", addr, "-brief"}, args...)...)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	s := string(out)
	return err == nil && strings.Contains(s, "CONNECTION ESTABLISHED"), s
}

// TestListenersRefuseOldTLS: on every listener (control, data and admin
// of both roles) openssl s_client with TLS 1.1, or TLS 1.2 limited to
// CBC-SHA1 suites, is refused, and a modern client with a credential is
// served.
func TestListenersRefuseOldTLS(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	blobs := t.TempDir()
	ctl, cadmin := talontest.FreeAddr(t), talontest.FreeAddr(t)
	cf := p.Files(t, pki.RoleCoordinator, "coord")
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, cadmin, append(p.Args(t, pki.RoleCoordinator, "coord"),
		"--admin-tls-cert-file", cf.CertFile, "--admin-tls-key-file", cf.KeyFile)...)...)
	data, wadmin := talontest.FreeAddr(t), talontest.FreeAddr(t)
	wf := p.Files(t, pki.RoleWorker, "worker-1")
	talontest.Start(t, "worker-1", talontest.WorkerArgs("worker-1", data, wadmin, []string{ctl}, blobs, t.TempDir(), append(p.Args(t, pki.RoleWorker, "worker-1"),
		"--admin-tls-cert-file", wf.CertFile, "--admin-tls-key-file", wf.KeyFile)...)...)
	client := p.Files(t, pki.RoleClient, "probe")
	testsupport.WaitFor(t, 20*time.Second, "listeners up", func() bool {
		ok1, _ := sClient(t, cadmin, "-CAfile", client.CAFile)
		ok2, _ := sClient(t, data, "-cert", client.CertFile, "-key", client.KeyFile, "-CAfile", client.CAFile)
		return ok1 && ok2
	})
	_ = coord
	creds := []string{"-cert", client.CertFile, "-key", client.KeyFile, "-CAfile", client.CAFile}
	for name, addr := range map[string]string{"control": ctl, "coordinator admin": cadmin, "data": data, "worker admin": wadmin} {
		t.Run(name, func(t *testing.T) {
			if ok, out := sClient(t, addr, append([]string{"-tls1_2"}, creds...)...); !ok {
				t.Fatalf("a TLS 1.2 client with a modern suite was refused:\n%s", out)
			}
			// SECLEVEL=0 lets OpenSSL 3 offer TLS 1.1 and SHA-1 suites at all,
			// so a refusal is the server's.
			if ok, out := sClient(t, addr, append([]string{"-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"}, creds...)...); ok {
				t.Fatalf("TLS 1.1 was accepted:\n%s", out)
			}
			cbc := "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES256-SHA:AES128-SHA:AES256-SHA:@SECLEVEL=0"
			if ok, out := sClient(t, addr, append([]string{"-tls1_2", "-cipher", cbc}, creds...)...); ok {
				t.Fatalf("a CBC-SHA1 suite was accepted:\n%s", out)
			}
		})
	}
}
