package deploy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
	"github.com/talonhq/talon/internal/testsupport"
	"sigs.k8s.io/yaml"
)

// releaseConfig is the part of goreleaser.yaml this test reads.
type releaseConfig struct {
	Before struct {
		Hooks []string `json:"hooks"`
	} `json:"before"`
	NFPMs []nfpmConfig `json:"nfpms"`
}

// nfpmConfig is one nfpms entry of goreleaser.yaml.
type nfpmConfig struct {
	ID          string           `json:"id"`
	IDs         []string         `json:"ids"`
	PackageName string           `json:"package_name"`
	Vendor      string           `json:"vendor"`
	Homepage    string           `json:"homepage"`
	Maintainer  string           `json:"maintainer"`
	Description string           `json:"description"`
	License     string           `json:"license"`
	Bindir      string           `json:"bindir"`
	Provides    []string         `json:"provides"`
	Conflicts   []string         `json:"conflicts"`
	Replaces    []string         `json:"replaces"`
	Contents    []map[string]any `json:"contents"`
	Scripts     map[string]string
}

// wantInPackage are the files a talon package must install.
var wantInPackage = []string{
	"/usr/bin/talon",
	"/usr/bin/talonctl",
	"/usr/lib/systemd/system/talon-coordinator.service",
	"/usr/lib/systemd/system/talon-worker.service",
	"/etc/talon/coordinator.yaml",
	"/etc/talon/worker.yaml",
	"/usr/share/man/man1/talon.1.gz",
	"/usr/share/man/man1/talon-worker.1.gz",
	"/usr/share/man/man1/talonctl.1.gz",
	"/usr/share/bash-completion/completions/talonctl",
	"/usr/share/zsh/vendor-completions/_talon",
	"/usr/share/fish/vendor_completions.d/talonctl.fish",
	"/usr/share/doc/talon/LICENSE",
}

// wantInCtlPackage are the files the talonctl package must install; it
// holds nothing that is not talonctl's (checkCtlOnly).
var wantInCtlPackage = []string{
	"/usr/bin/talonctl",
	"/usr/share/man/man1/talonctl.1.gz",
	"/usr/share/man/man1/talonctl-nodes-drain.1.gz",
	"/usr/share/bash-completion/completions/talonctl",
	"/usr/share/zsh/vendor-completions/_talonctl",
	"/usr/share/fish/vendor_completions.d/talonctl.fish",
	"/usr/share/doc/talonctl/LICENSE",
}

// checkCtlOnly reports every file of the talonctl package that is not
// talonctl's: the daemon, its units, its configuration, talon's man pages.
func checkCtlOnly(t *testing.T, what string, files []string) {
	t.Helper()
	for _, f := range files {
		if !strings.Contains(f, "talonctl") {
			t.Errorf("%s holds %s, which is not talonctl's", what, f)
		}
	}
}

// TestPackages builds the debs and rpms that goreleaser.yaml describes
// (with nfpm, the library goreleaser packages with, from the same contents
// and scripts): talon (daemon and talonctl) and talonctl alone. It checks
// their file lists, the config-file marking of /etc/talon, the gzipped man
// pages, the maintainer scripts, and that the two packages exclude each
// other (both install talonctl).
func TestPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and four packages")
	}
	t.Chdir("..") // the repository root: goreleaser's working directory
	rc := readReleaseConfig(t)
	if len(rc.NFPMs) != 2 || rc.NFPMs[0].ID != "talon" || rc.NFPMs[1].ID != "talonctl" {
		t.Fatalf("goreleaser.yaml has nfpms %+v, want talon and talonctl", rc.NFPMs)
	}
	if _, err := os.Stat("LICENSE"); err != nil {
		t.Fatalf("no LICENSE in the repository: %v", err)
	}
	runPackageHooks(t, rc)
	bin := t.TempDir()
	for _, name := range []string{"talon", "talonctl"} {
		if out, err := testsupport.GoBuild("", filepath.Join(bin, name), "./cmd/"+name).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	talon, ctl := rc.NFPMs[0], rc.NFPMs[1]
	if !slices.Equal(ctl.IDs, []string{"talonctl"}) || !slices.Equal(ctl.Conflicts, []string{"talon"}) {
		t.Errorf("the talonctl package builds %v and conflicts with %v, want talonctl alone and a conflict with talon", ctl.IDs, ctl.Conflicts)
	}
	for _, rel := range [][]string{talon.Provides, talon.Conflicts, talon.Replaces} {
		if !slices.Equal(rel, []string{"talonctl"}) {
			t.Errorf("the talon package must provide, conflict with and replace talonctl: %v %v %v", talon.Provides, talon.Conflicts, talon.Replaces)
		}
	}
	out := t.TempDir()
	for _, format := range []string{"deb", "rpm"} {
		files := buildPackage(t, talon, bin, out, format)
		t.Logf("talon %s: %d files", format, len(files))
		checkFiles(t, "talon."+format, files, wantInPackage)
		if format == "deb" {
			checkDebControl(t, filepath.Join(out, "talon.deb"))
		}
		files = buildPackage(t, ctl, bin, out, format)
		t.Logf("talonctl %s: %d files", format, len(files))
		checkFiles(t, "talonctl."+format, files, wantInCtlPackage)
		checkCtlOnly(t, "talonctl."+format, files)
	}
}

func readReleaseConfig(t *testing.T) releaseConfig {
	t.Helper()
	raw, err := os.ReadFile("goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rc releaseConfig
	if err := yaml.Unmarshal(raw, &rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

// runPackageHooks runs the before hooks that prepare package contents
// (gzipped man pages).
func runPackageHooks(t *testing.T, rc releaseConfig) {
	t.Helper()
	for _, h := range rc.Before.Hooks {
		if strings.Contains(h, "build/man") {
			cmd := exec.Command("sh", "-c", strings.TrimPrefix(strings.TrimSuffix(strings.TrimSpace(h[len("sh -c "):]), "'"), "'"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("hook %q: %v\n%s", h, err, out)
			}
		}
	}
}

// buildPackage builds n's package in format into dir (named
// PACKAGE.FORMAT) with the binaries of its builds from bin, and lists its
// files.
func buildPackage(t *testing.T, n nfpmConfig, bin, dir, format string) []string {
	t.Helper()
	contents := slices.Clone(n.Contents)
	for _, name := range n.IDs { // each build's binary is named after it
		contents = append(contents, map[string]any{"src": filepath.Join(bin, name), "dst": filepath.Join(n.Bindir, name)})
	}
	conf := map[string]any{
		"name": n.PackageName, "arch": "amd64", "platform": "linux", "version": "0.0.0-test",
		"vendor": n.Vendor, "homepage": n.Homepage, "maintainer": n.Maintainer, "description": n.Description, "license": n.License,
		"contents": contents, "scripts": n.Scripts, "provides": n.Provides, "conflicts": n.Conflicts, "replaces": n.Replaces,
	}
	b, err := yaml.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nfpm.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("nfpm config %s from goreleaser.yaml: %v", n.ID, err)
	}
	info, err := cfg.Get(format)
	if err != nil {
		t.Fatal(err)
	}
	info = nfpm.WithDefaults(info)
	pkg, err := nfpm.Get(format)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, n.PackageName+"."+format)
	f, err := os.Create(target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info.Target = target
	if err := pkg.Package(info, f); err != nil {
		t.Fatalf("%s %s: %v", n.ID, format, err)
	}
	if format == "deb" {
		return debFiles(t, target)
	}
	return rpmFiles(t, target)
}

// checkFiles checks that files holds every file of want and only gzipped
// man pages.
func checkFiles(t *testing.T, what string, files, want []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(files, w) {
			t.Errorf("%s lacks %s; it holds:\n%s", what, w, strings.Join(files, "\n"))
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "/usr/share/man/") && strings.HasSuffix(f, ".1") {
			t.Errorf("%s: man page %s is not gzipped", what, f)
		}
	}
}

// checkDebControl checks the talon deb's conffiles, its postinst and that
// it replaces the talonctl package.
func checkDebControl(t *testing.T, deb string) {
	t.Helper()
	ctl, err := exec.Command("dpkg-deb", "--ctrl-tarfile", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	conffiles := tarMember(t, ctl, "conffiles")
	for _, c := range []string{"/etc/talon/coordinator.yaml", "/etc/talon/worker.yaml"} {
		if !strings.Contains(conffiles, c) {
			t.Errorf("deb conffiles lack %s:\n%s", c, conffiles)
		}
	}
	if post := tarMember(t, ctl, "postinst"); !strings.Contains(post, "useradd --system") {
		t.Errorf("deb postinst does not create the talon user:\n%s", post)
	}
	if control := tarMember(t, ctl, "control"); !strings.Contains(control, "Conflicts: talonctl") || !strings.Contains(control, "Replaces: talonctl") {
		t.Errorf("the talon deb does not replace talonctl:\n%s", control)
	}
}

// debFiles lists the regular files of a deb with dpkg-deb.
func debFiles(t *testing.T, path string) []string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed")
	}
	out, err := exec.Command("dpkg-deb", "--contents", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.HasPrefix(f[0], "-") {
			files = append(files, strings.TrimPrefix(f[5], "."))
		}
	}
	return files
}

// tarMember returns one member of an uncompressed tar read with tar(1).
func tarMember(t *testing.T, tarball []byte, name string) string {
	t.Helper()
	cmd := exec.Command("tar", "-xOf", "-", "./"+name)
	cmd.Stdin = bytes.NewReader(tarball)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("member %s of the control archive: %v", name, err)
	}
	return string(out)
}

// rpmFiles lists the file names in an rpm's header (tags BASENAMES 1117,
// DIRNAMES 1118 and DIRINDEXES 1116), read directly: no rpm tool needed.
func rpmFiles(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 96 || !bytes.Equal(b[:4], []byte{0xed, 0xab, 0xee, 0xdb}) {
		t.Fatal("not an rpm: bad lead")
	}
	off := 96
	sig, n, err := rpmHeader(b, off)
	if err != nil {
		t.Fatalf("rpm signature header: %v", err)
	}
	_ = sig
	off += n
	off += (8 - off%8) % 8 // the signature header is padded to 8 bytes
	h, _, err := rpmHeader(b, off)
	if err != nil {
		t.Fatalf("rpm header: %v", err)
	}
	base, dirs, idx := h.strings(1117), h.strings(1118), h.int32s(1116)
	if len(base) == 0 || len(base) != len(idx) {
		t.Fatalf("rpm file tags: %d basenames, %d dir indexes", len(base), len(idx))
	}
	files := make([]string, len(base))
	for i := range base {
		files[i] = dirs[idx[i]] + base[i]
	}
	return files
}

type rpmHdr struct {
	entries map[uint32][3]uint32 // tag -> type, offset, count
	store   []byte
}

func rpmHeader(b []byte, off int) (*rpmHdr, int, error) {
	if off+16 > len(b) || !bytes.Equal(b[off:off+3], []byte{0x8e, 0xad, 0xe8}) {
		return nil, 0, errors.New("bad header magic")
	}
	count := int(binary.BigEndian.Uint32(b[off+8:]))
	size := int(binary.BigEndian.Uint32(b[off+12:]))
	start := off + 16
	storeAt := start + 16*count
	if storeAt+size > len(b) {
		return nil, 0, fmt.Errorf("header of %d entries and %d bytes runs past the file", count, size)
	}
	h := &rpmHdr{entries: map[uint32][3]uint32{}, store: b[storeAt : storeAt+size]}
	for i := range count {
		e := b[start+16*i:]
		h.entries[binary.BigEndian.Uint32(e)] = [3]uint32{binary.BigEndian.Uint32(e[4:]), binary.BigEndian.Uint32(e[8:]), binary.BigEndian.Uint32(e[12:])}
	}
	return h, 16 + 16*count + size, nil
}

func (h *rpmHdr) strings(tag uint32) []string {
	e, ok := h.entries[tag]
	if !ok {
		return nil
	}
	out := make([]string, 0, e[2])
	p := int(e[1])
	for range e[2] {
		end := bytes.IndexByte(h.store[p:], 0)
		if end < 0 {
			break
		}
		out = append(out, string(h.store[p:p+end]))
		p += end + 1
	}
	return out
}

func (h *rpmHdr) int32s(tag uint32) []int {
	e, ok := h.entries[tag]
	if !ok {
		return nil
	}
	out := make([]int, e[2])
	for i := range out {
		out[i] = int(binary.BigEndian.Uint32(h.store[int(e[1])+4*i:]))
	}
	return out
}

// TestReleaseConfig: goreleaser.yaml stamps the commit's time (reproducible
// builds), ships LICENSE in every archive, and its SBOM command produces a
// CycloneDX document of talon's module graph.
func TestReleaseConfig(t *testing.T) {
	raw, err := os.ReadFile("../goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rc struct {
		Builds []struct {
			ID           string   `json:"id"`
			Ldflags      []string `json:"ldflags"`
			ModTimestamp string   `json:"mod_timestamp"`
		} `json:"builds"`
		Archives []struct {
			ID    string   `json:"id"`
			Files []string `json:"files"`
		} `json:"archives"`
		SBOMs []struct {
			Cmd  string   `json:"cmd"`
			Args []string `json:"args"`
		} `json:"sboms"`
	}
	if err := yaml.Unmarshal(raw, &rc); err != nil {
		t.Fatal(err)
	}
	for _, b := range rc.Builds {
		if b.ModTimestamp != "{{ .CommitTimestamp }}" || !strings.Contains(strings.Join(b.Ldflags, " "), "Date={{.CommitDate}}") {
			t.Errorf("build %s is not reproducible: mod_timestamp %q, ldflags %v", b.ID, b.ModTimestamp, b.Ldflags)
		}
		// The version is the git tag's (goreleaser's .Version), so that
		// the records, talonctl version and the skew errors name releases.
		if !strings.Contains(strings.Join(b.Ldflags, " "), "buildinfo.Version={{.Version}}") {
			t.Errorf("build %s does not stamp the tag's version: ldflags %v", b.ID, b.Ldflags)
		}
	}
	for _, a := range rc.Archives {
		if !slices.Contains(a.Files, "LICENSE") {
			t.Errorf("archive %s lacks LICENSE", a.ID)
		}
	}
	if len(rc.SBOMs) != 1 || rc.SBOMs[0].Cmd != "go" {
		t.Fatalf("sboms: %+v", rc.SBOMs)
	}
	if testing.Short() {
		return
	}
	// Run the SBOM command as goreleaser would, on a talon binary.
	dir := t.TempDir()
	binary := filepath.Join(dir, "talon")
	build := testsupport.GoBuild("..", binary, "./cmd/talon")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	doc := filepath.Join(dir, "talon.cdx.json")
	args := slices.Clone(rc.SBOMs[0].Args)
	for i, a := range args {
		switch a {
		case "$document":
			args[i] = doc
		case "$artifact":
			args[i] = binary
		case "{{ .Version }}":
			args[i] = "v0.0.0-test"
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sbom command: %v\n%s", err, out)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Name string `json:"name"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &bom); err != nil || bom.BOMFormat != "CycloneDX" {
		t.Fatalf("sbom is not CycloneDX JSON: %v", err)
	}
	var names []string
	for _, c := range bom.Components {
		names = append(names, c.Name)
	}
	for _, want := range []string{"go.etcd.io/etcd/client/v3", "k8s.io/client-go", "github.com/spf13/cobra"} {
		if !slices.Contains(names, want) {
			t.Errorf("sbom lacks %s (it lists %d components)", want, len(names))
		}
	}
}

// TestUnitsSandboxed: systemd-analyze rates both units at most 1.5 (it was
// 8.5 "EXPOSED" before hardening; 1.2 now).
func TestUnitsSandboxed(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed (docs/install.md records the scores)")
	}
	for _, u := range []string{"systemd/talon-coordinator.service", "systemd/talon-worker.service"} {
		out, err := exec.Command("systemd-analyze", "security", "--offline=true", u).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze %s: %v\n%s", u, err, out)
		}
		i := bytes.Index(out, []byte("Overall exposure level for "))
		if i < 0 {
			t.Fatalf("no overall score for %s:\n%s", u, out)
		}
		var unit string
		var score float64
		if _, err := fmt.Sscanf(string(out[i:]), "Overall exposure level for %s %g", &unit, &score); err != nil {
			t.Fatalf("parse score of %s: %v\n%s", u, err, out[i:])
		}
		if score > 1.5 {
			t.Errorf("%s exposure %.1f, want at most 1.5", u, score)
		}
	}
}

// TestUnitsNotify: both units are Type=notify with only the main process
// allowed to notify (talon sends READY=1 when /readyz turns 200 and
// STOPPING=1 at the drain: internal/integration/ops's TestSystemdNotify), and
// name a start timeout on purpose.
func TestUnitsNotify(t *testing.T) {
	for _, u := range []string{"systemd/talon-coordinator.service", "systemd/talon-worker.service"} {
		settings := map[string]string{}
		for _, line := range strings.Split(string(mustRead(t, u)), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(line, "#") {
				settings[k] = v
			}
		}
		for k, want := range map[string]string{"Type": "notify", "NotifyAccess": "main"} {
			if settings[k] != want {
				t.Errorf("%s: %s=%q, want %q", u, k, settings[k], want)
			}
		}
		if settings["TimeoutStartSec"] == "" {
			t.Errorf("%s: no TimeoutStartSec: a Type=notify unit waits for READY=1 only that long (default 90s)", u)
		}
	}
}

// cosignBin returns cosign from TALON_COSIGN or PATH, or "" when there is
// none: building it from github.com/sigstore/cosign/v2 takes minutes and
// hundreds of modules, so make test does not (see docs/operations.md,
// "Releases").
func cosignBin() string {
	if p := os.Getenv("TALON_COSIGN"); p != "" {
		return p
	}
	p, _ := exec.LookPath("cosign")
	return p
}

// TestReleaseSigning: goreleaser.yaml signs checksums.txt and the image
// with cosign, from a key in the environment (never a file in the
// repository), and, where cosign is available, the checksum signing
// command as configured signs a checksums file with a fresh key pair that
// cosign verify-blob accepts, and rejects once the file changed.
func TestReleaseSigning(t *testing.T) {
	var rc struct {
		Signs []struct {
			ID        string   `json:"id"`
			Cmd       string   `json:"cmd"`
			Artifacts string   `json:"artifacts"`
			Signature string   `json:"signature"`
			Args      []string `json:"args"`
		} `json:"signs"`
		DockerSigns []struct {
			Cmd       string   `json:"cmd"`
			Artifacts string   `json:"artifacts"`
			Args      []string `json:"args"`
		} `json:"docker_signs"`
	}
	if err := yaml.Unmarshal(mustRead(t, "../goreleaser.yaml"), &rc); err != nil {
		t.Fatal(err)
	}
	if len(rc.Signs) != 1 || rc.Signs[0].Cmd != "cosign" || rc.Signs[0].Artifacts != "checksum" || rc.Signs[0].Args[0] != "sign-blob" {
		t.Fatalf("signs: %+v, want one cosign sign-blob of the checksum file", rc.Signs)
	}
	if len(rc.DockerSigns) != 1 || rc.DockerSigns[0].Cmd != "cosign" || rc.DockerSigns[0].Args[0] != "sign" ||
		!slices.Contains(rc.DockerSigns[0].Args, "${artifact}@${digest}") || (rc.DockerSigns[0].Artifacts != "all" && rc.DockerSigns[0].Artifacts != "manifests") {
		t.Fatalf("docker_signs: %+v, want cosign sign of the image by digest", rc.DockerSigns)
	}
	for _, args := range [][]string{rc.Signs[0].Args, rc.DockerSigns[0].Args} {
		if !slices.Contains(args, "--key=env://COSIGN_PRIVATE_KEY") || !slices.Contains(args, "--yes") {
			t.Errorf("cosign %v: want the key from COSIGN_PRIVATE_KEY and --yes (no prompt in CI)", args)
		}
	}

	cosign := cosignBin()
	if cosign == "" {
		t.Skip("cosign not installed (set TALON_COSIGN): the configuration is checked, the signature round trip is not")
	}
	dir := t.TempDir()
	run := func(env []string, args ...string) ([]byte, error) {
		cmd := exec.Command(cosign, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	}
	pw := "COSIGN_PASSWORD=talon-test"
	if out, err := run([]string{pw}, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	checksums := filepath.Join(dir, "checksums.txt")
	if err := os.WriteFile(checksums, []byte("0123abcd  talon_1.2.3_linux_amd64.tar.gz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sig := strings.ReplaceAll(rc.Signs[0].Signature, "${artifact}", checksums)
	var args []string
	for _, a := range rc.Signs[0].Args {
		args = append(args, strings.NewReplacer("${artifact}", checksums, "${signature}", sig).Replace(a))
	}
	// Offline: no transparency-log upload here (the release uploads).
	args = append(args, "--tlog-upload=false")
	key := string(mustRead(t, filepath.Join(dir, "cosign.key")))
	if out, err := run([]string{pw, "COSIGN_PRIVATE_KEY=" + key}, args...); err != nil {
		t.Fatalf("cosign %v (as goreleaser.yaml signs checksums.txt): %v\n%s", args, err, out)
	}
	verify := []string{"verify-blob", "--key", "cosign.pub", "--signature", sig, "--insecure-ignore-tlog=true", checksums}
	if out, err := run(nil, verify...); err != nil {
		t.Fatalf("cosign verify-blob of the signed checksums: %v\n%s", err, out)
	}
	if err := os.WriteFile(checksums, []byte("ffffffff  talon_1.2.3_linux_amd64.tar.gz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(nil, verify...); err == nil {
		t.Fatalf("cosign verify-blob accepted a changed checksums.txt:\n%s", out)
	}
}
