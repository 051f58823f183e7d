package security

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestTalonGetHonoursDenyList: `talon get --tls-deny-file` refuses a
// worker whose credential is on the list, as the cluster's processes do:
// with one of three workers denied the read succeeds from the others (two
// of three still vouch for every block), with all denied it fails naming
// the deny list, and nothing is written. (On the old code talon get had
// no deny list and read from any.)
func TestTalonGetHonoursDenyList(t *testing.T) {
	talontest.SkipShort(t)
	p := talontest.NewPKI(t)
	blobs := t.TempDir()
	want := talontest.WriteBlob(t, blobs, "obj.bin", 3*talontest.BlockSize+7, 5)
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), p.Args(t, pki.RoleCoordinator, "coord")...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	for _, w := range []string{"w-a", "w-b", "w-c"} {
		talontest.Start(t, w, talontest.WorkerArgs(w, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), p.Args(t, pki.RoleWorker, w)...)...)
	}
	talontest.WaitEligible(t, 30*time.Second, 3, coord)
	f := p.Files(t, pki.RoleClient, "reader")
	dir := t.TempDir()
	get := func(name, denied string) (talontest.Result, []byte) {
		deny := filepath.Join(dir, name+".deny")
		if err := os.WriteFile(deny, []byte(denied), 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		res := talontest.RunTalon(t, nil, "get", "obj.bin", "-o", out, "--coordinators", ctl, "--block-size", "1MiB", "--replicas", "3",
			"--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile, "--tls-deny-file", deny, "--timeout", "30s")
		got, _ := os.ReadFile(out)
		return res, got
	}
	if res, got := get("one-denied", "worker/w-a\n"); res.Code != 0 || !bytes.Equal(got, want) {
		t.Fatalf("one of three workers denied: exit %d, %d right bytes of %d\n%s", res.Code, len(got), len(want), res.Stderr)
	}
	res, got := get("all-denied", "node:w-a\nnode:w-b\nnode:w-c\n")
	if res.Code == 0 || len(got) != 0 {
		t.Fatalf("every worker denied: exit %d with %d bytes written; want a failure and nothing written\n%s", res.Code, len(got), res.Stderr)
	}
	if !bytes.Contains([]byte(res.Stderr), []byte("deny")) {
		t.Errorf("the failure does not name the deny list:\n%s", res.Stderr)
	}
}
