package ops

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cli/debug/bundle"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// readBundle returns the files of a tar.gz by name.
func readBundle(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

// longestLine is the longest line of a file: a PEM key's base64 body.
func longestLine(t *testing.T, path string) string {
	t.Helper()
	best := ""
	for _, l := range strings.Split(string(mustReadFile(t, path)), "\n") {
		if len(l) > len(best) {
			best = l
		}
	}
	return best
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDebugBundle runs talonctl debug bundle against three coordinators
// that hold secrets of every kind (admin tokens from a file and the
// environment, an etcd password, an etcd client key, a presigned URL), and
// checks the archive: a manifest that lists every coordinator's parts, all
// collected, and none of the secrets anywhere in it.
func TestDebugBundle(t *testing.T) {
	talontest.SkipShort(t)
	etcd := testenv.StartEtcd(t, testenv.EtcdOptions{ClientCertAuth: true, Auth: true})
	ef := etcd.TLSFiles()
	envToken := "env-admin-token-7c1f04be93"
	signature := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	presigned := "https://grafana.test/d/talon?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=" + signature
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(tokens, []byte("maintainer:read,metrics,debug:"+talontest.OpsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"the token file's token": talontest.OpsToken, "the environment's token": envToken,
		"the etcd password": etcd.RootPassword(), "the etcd client key": longestLine(t, ef.KeyFile), "the presigned URL's signature": signature,
	}
	var coords []*talontest.Proc
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("coord-%d", i)
		args := []string{"coordinator", "--cluster-id", "it", "--node-id", id, "--listen", talontest.FreeAddr(t), "--admin-listen", talontest.FreeAddr(t),
			"--log-level", "info", "--admin-token-file", tokens, "--admin-ui-dashboard-url", presigned,
			"--state-backend", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--etcd-username", testenv.EtcdRootUser,
			"--etcd-ca-file", ef.CAFile, "--etcd-cert-file", ef.CertFile, "--etcd-key-file", ef.KeyFile, "--ha", "--coordinator-replicas", "3"}
		args = append(append(args, opsTiming...), talontest.InsecureArgs...)
		coords = append(coords, talontest.StartWithEnv(t, id, []string{"TALON_ETCD_PASSWORD=" + etcd.RootPassword(), "TALON_ADMIN_TOKEN=" + envToken}, args...))
	}
	testsupport.WaitFor(t, 30*time.Second, "three coordinators ready", func() bool {
		return talontest.Ready(t, coords[0]) && talontest.Ready(t, coords[1]) && talontest.Ready(t, coords[2])
	})
	out := filepath.Join(t.TempDir(), "bundle.tar.gz")
	code, stdout, stderr := talontest.Ctl(t, []string{"http://" + coords[0].Admin}, "debug", "bundle", "--duration", "1s", "-o", out)
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "wrote "+out+": 3 coordinators, 30 parts") {
		t.Fatalf("debug bundle: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("archive: %v %v", st, err)
	}
	files := readBundle(t, out)
	var m bundle.Manifest
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Coordinators) != 3 {
		t.Fatalf("manifest lists %d coordinators", len(m.Coordinators))
	}
	for _, c := range m.Coordinators {
		if len(c.Parts) != 10 {
			t.Errorf("%s: %d parts, want 10", c.NodeID, len(c.Parts))
		}
		for _, p := range c.Parts {
			if p.Error != "" || len(files[p.Path]) == 0 || len(files[p.Path]) != p.Bytes {
				t.Errorf("%s %s: %+v (%d bytes in the archive)", c.NodeID, p.Name, p, len(files[p.Path]))
			}
		}
		// The configuration is there, redacted.
		cfg := string(files["coordinators/"+c.NodeID+"/config.yaml"])
		if !strings.Contains(cfg, `etcd-password: "`) || !strings.Contains(cfg, "admin-ui-dashboard-url:") || !strings.Contains(cfg, "node-id: \""+c.NodeID+"\"") {
			t.Errorf("%s config.yaml:\n%s", c.NodeID, cfg)
		}
	}
	for name, b := range files {
		if strings.HasSuffix(name, ".gz") { // a profile: search its contents
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if files[name], err = io.ReadAll(zr); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	for what, secret := range secrets {
		for name, b := range files {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s is in %s", what, name)
			}
		}
	}
}
