package security

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestDenyListRevokes: a client credential stolen and then written to the
// coordinators' and workers' tls-deny-file is refused within about a
// second of the file changing: new handshakes on the control and data
// ports, and the next request on a connection it already held. Other
// credentials are unaffected. (Before, a credential stayed valid until
// it expired, 2160 h by default.)
func TestDenyListRevokes(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	deny := filepath.Join(t.TempDir(), "deny")
	if err := os.WriteFile(deny, []byte("# revoked credentials\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), append(p.Args(t, pki.RoleCoordinator, "coord"), "--tls-deny-file", deny)...)...)
	testsupport.WaitFor(t, 30*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	data := talontest.FreeAddr(t)
	w := talontest.Start(t, "worker-1", talontest.WorkerArgs("worker-1", data, talontest.FreeAddr(t), []string{ctl}, t.TempDir(), t.TempDir(), append(p.Args(t, pki.RoleWorker, "worker-1"), "--tls-deny-file", deny)...)...)
	testsupport.WaitFor(t, 30*time.Second, "worker ready", func() bool { return talontest.Ready(t, w) })

	stolen := p.Source(t, pki.RoleClient, "stolen")
	other := p.Source(t, pki.RoleClient, "other")
	ping := func(cn *protocol.Conn) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cn.Call(ctx, &protocol.Ping{})
		return err
	}
	dialCtl := func(src *pki.Source) (*protocol.Conn, error) {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ctl, src.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}}))
		if err != nil {
			return nil, err
		}
		cn := protocol.NewConn(nc, protocol.ConnOptions{})
		t.Cleanup(func() { cn.Close() })
		return cn, ping(cn)
	}
	getData := func(src *pki.Source) error {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: src.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})}}
		resp, err := hc.Get("https://" + data + "/v1/objects/none")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusForbidden {
			return &protocol.Error{Code: protocol.CodePermissionDenied}
		}
		return nil
	}
	held, err := dialCtl(stolen)
	if err != nil {
		t.Fatalf("the credential before it was revoked: %v", err)
	}
	if err := getData(stolen); err != nil {
		t.Fatalf("the credential on the data port before it was revoked: %v", err)
	}

	written := time.Now()
	if err := os.WriteFile(deny, []byte("# revoked credentials\nclient/stolen\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var refusedCtl, refusedData time.Duration
	testsupport.WaitFor(t, 10*time.Second, "the stolen credential refused on both ports", func() bool {
		if refusedCtl == 0 {
			if _, err := dialCtl(stolen); err != nil {
				refusedCtl = time.Since(written)
			}
		}
		if refusedData == 0 {
			if err := getData(stolen); err != nil {
				refusedData = time.Since(written)
			}
		}
		time.Sleep(20 * time.Millisecond)
		return refusedCtl > 0 && refusedData > 0
	})
	heldErr := ping(held)
	t.Logf("deny list written: new control connections refused after %v, data requests after %v; held connection: %v", refusedCtl.Round(time.Millisecond), refusedData.Round(time.Millisecond), heldErr)
	if !protocol.IsCode(heldErr, protocol.CodePermissionDenied) {
		t.Errorf("a connection held since before the revocation: %v, want permission_denied", heldErr)
	}
	// Within about a second (the files are checked at most once a
	// second), with room for a loaded machine.
	if limit := 3 * time.Second; refusedCtl > limit || refusedData > limit {
		t.Errorf("refused after %v and %v, want within about a second", refusedCtl, refusedData)
	}
	if _, err := dialCtl(other); err != nil {
		t.Errorf("another credential after the revocation: %v", err)
	}
	if err := getData(other); err != nil {
		t.Errorf("another credential on the data port after the revocation: %v", err)
	}
	if !talontest.Ready(t, w) {
		t.Error("the worker is no longer ready")
	}
}
