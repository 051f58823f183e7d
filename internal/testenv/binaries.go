package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Environment variables that name prebuilt server binaries. The Makefile sets
// both after running build-servers.sh; when one is unset the binary lookup
// runs the script itself.
const (
	EnvEtcdBin          = "TALON_ETCD_BIN"
	EnvKubeAPIServerBin = "TALON_KUBE_APISERVER_BIN"
)

const modulePath = "github.com/talonhq/talon"

// SkipIfShort skips t when tests run with -short. Every test that starts a
// server calls it first, so `go test -short ./...` never builds or starts one.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts real servers; skipped under -short")
	}
}

// EtcdBinary returns the path of the etcd binary: $TALON_ETCD_BIN when set,
// otherwise the one build-servers.sh builds (or finds in its cache). It fails
// t when neither yields an executable file; it never skips.
func EtcdBinary(t testing.TB) string {
	t.Helper()
	return serverBinary(t, EnvEtcdBin, "etcd")
}

// KubeAPIServerBinary returns the path of the kube-apiserver binary:
// $TALON_KUBE_APISERVER_BIN when set, otherwise the one build-servers.sh
// builds (or finds in its cache). It fails t when neither yields an
// executable file; it never skips.
func KubeAPIServerBinary(t testing.TB) string {
	t.Helper()
	return serverBinary(t, EnvKubeAPIServerBin, "kube-apiserver")
}

func serverBinary(t testing.TB, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if err := checkExecutable(p); err != nil {
			t.Fatalf("testenv: %s=%q: %v (unset it to build %s with internal/testenv/build-servers.sh)", env, p, err, name)
		}
		return p
	}
	dir, err := buildServers(name)
	if err != nil {
		t.Fatalf("testenv: %s not found: %s is unset and building it failed: %v", name, env, err)
	}
	p := filepath.Join(dir, name)
	if err := checkExecutable(p); err != nil {
		t.Fatalf("testenv: build-servers.sh printed %q but %s there: %v", dir, name, err)
	}
	return p
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory, want an executable file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("mode %v is not executable", fi.Mode().Perm())
	}
	return nil
}

// buildServers runs build-servers.sh for the named binaries (both when none
// is named) and returns the directory it prints.
// The script caches by content hash and serialises concurrent runs with a
// lock, so calling it from every test (and from parallel test binaries) is
// cheap once the binaries exist.
func buildServers(names ...string) (string, error) {
	script, err := buildScript()
	if err != nil {
		return "", err
	}
	return runBuildScript(script, names...)
}

// runBuildScript runs one of the build scripts beside this file and returns
// the path it prints last; an error carries the tail of its output.
func runBuildScript(script string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, tail(stderr.String(), 60))
	}
	p := strings.TrimSpace(lastLine(stdout.String()))
	if p == "" {
		return "", fmt.Errorf("%s printed no path\n%s", script, tail(stderr.String(), 60))
	}
	return p, nil
}

// buildScript finds internal/testenv/build-servers.sh by walking up from the
// working directory (go test runs in the package directory) to Talon's go.mod.
func buildScript() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if isTalonModuleRoot(dir) {
			return filepath.Join(dir, "internal", "testenv", "build-servers.sh"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for %s above %s; set %s and %s", modulePath, wd, EnvEtcdBin, EnvKubeAPIServerBin)
		}
		dir = parent
	}
}

func isTalonModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
