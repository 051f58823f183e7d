package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// goreleaserBin is goreleaser: TALON_GORELEASER, else bin/goreleaser
// (make goreleaser builds it there from its pinned module), else "".
func goreleaserBin() string {
	if p := os.Getenv("TALON_GORELEASER"); p != "" {
		return p
	}
	if p, err := filepath.Abs("../bin/goreleaser"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// snapshotConfig is goreleaser.yaml with dist in dir and fewer targets
// (talon for linux/amd64; talonctl for linux/amd64, darwin/arm64 and
// windows/amd64: one of each archive, package, cask and manifest kind)
// so that a snapshot builds four binaries, not ten, on a test machine.
func snapshotConfig(t *testing.T, dir string) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(mustRead(t, "goreleaser.yaml"), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["dist"] = filepath.Join(dir, "dist")
	for _, b := range cfg["builds"].([]any) {
		build := b.(map[string]any)
		build["goos"], build["goarch"] = []string{"linux"}, []string{"amd64"}
		if build["id"] == "talonctl" {
			build["goarch"] = []string{"amd64", "arm64"}
			build["goos"] = []string{"linux", "darwin", "windows"}
			build["ignore"] = []map[string]string{{"goos": "linux", "goarch": "arm64"}, {"goos": "darwin", "goarch": "amd64"}, {"goos": "windows", "goarch": "arm64"}}
		}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "goreleaser.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReleaseSnapshot runs `goreleaser release --snapshot` (without the
// image, signatures and SBOMs, which need a registry, a key and a module
// download) and checks the talonctl-only artefacts: a deb and an rpm that
// hold talonctl's files and nothing else, beside the talon packages, and
// the Homebrew cask and Scoop manifest goreleaser rendered, which install
// talonctl from the talonctl archives.
func TestReleaseSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four binaries and every archive and package")
	}
	gr := goreleaserBin()
	if gr == "" {
		t.Skip("goreleaser not installed (make goreleaser builds it into bin/, or set TALON_GORELEASER)")
	}
	tmp := t.TempDir()
	t.Chdir("..") // the repository root: goreleaser's working directory
	cfg := snapshotConfig(t, tmp)
	cmd := exec.Command(gr, "release", "--snapshot", "--clean", "--skip=ko,sign,sbom", "--config", cfg)
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", err, out)
	}
	dist := filepath.Join(tmp, "dist")
	for _, glob := range []string{"talon_*.deb", "talon-*.rpm", "talon_*.rpm"} {
		if m, _ := filepath.Glob(filepath.Join(dist, glob)); len(m) > 0 {
			t.Logf("daemon package %s", filepath.Base(m[0]))
		}
	}
	checkCtlPackages(t, dist)
	checkCask(t, dist)
	checkScoop(t, dist)
}

// checkCtlPackages checks the talonctl deb and rpm of dist, and that the
// talon packages were built too.
func checkCtlPackages(t *testing.T, dist string) {
	t.Helper()
	for _, ext := range []string{"deb", "rpm"} {
		all, _ := filepath.Glob(filepath.Join(dist, "*."+ext))
		var ctl, daemon []string
		for _, p := range all {
			if strings.HasPrefix(filepath.Base(p), "talonctl") {
				ctl = append(ctl, p)
			} else {
				daemon = append(daemon, p)
			}
		}
		if len(ctl) != 1 || len(daemon) != 1 {
			t.Fatalf("%s packages in dist: %v; want one talonctl and one talon", ext, all)
		}
		var files []string
		if ext == "deb" {
			files = debFiles(t, ctl[0])
		} else {
			files = rpmFiles(t, ctl[0])
		}
		t.Logf("%s: %s", filepath.Base(ctl[0]), strings.Join(files, " "))
		checkFiles(t, filepath.Base(ctl[0]), files, wantInCtlPackage)
		checkCtlOnly(t, filepath.Base(ctl[0]), files)
	}
}

// findRendered returns the one file named name under dist.
func findRendered(t *testing.T, dist, name string) string {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(dist, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("%s under dist: %v, want one", name, found)
	}
	return string(mustRead(t, found[0]))
}

// checkCask checks the Homebrew cask: it is talonctl's, installs the
// talonctl binary, man page and completions from the talonctl archives.
func checkCask(t *testing.T, dist string) {
	t.Helper()
	rb := findRendered(t, dist, "talonctl.rb")
	for _, want := range []string{`cask "talonctl"`, `binary "talonctl"`, "talonctl_", "darwin_arm64.tar.gz", "manpage", "talonctl.bash"} {
		if !strings.Contains(rb, want) {
			t.Errorf("cask lacks %q:\n%s", want, rb)
		}
	}
	if strings.Contains(rb, `"talon"`) || strings.Contains(rb, "talon_") {
		t.Errorf("cask names the daemon:\n%s", rb)
	}
}

// checkScoop checks the Scoop manifest: talonctl.exe from the talonctl
// Windows archive.
func checkScoop(t *testing.T, dist string) {
	t.Helper()
	raw := findRendered(t, dist, "talonctl.json")
	var m struct {
		Version      string `json:"version"`
		Architecture map[string]struct {
			URL string `json:"url"`
			Bin any    `json:"bin"`
		} `json:"architecture"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("scoop manifest: %v\n%s", err, raw)
	}
	a, ok := m.Architecture["64bit"]
	bin, _ := json.Marshal(a.Bin)
	if !ok || !strings.Contains(a.URL, "/talonctl_") || !strings.HasSuffix(a.URL, "_windows_amd64.zip") || !strings.Contains(string(bin), "talonctl.exe") {
		t.Errorf("scoop manifest does not install talonctl.exe from the talonctl archive:\n%s", raw)
	}
}
