package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// EnvHelmBin names a prebuilt helm binary; when unset, HelmBinary runs
// build-helm.sh, which builds helm from its Go module once and caches it.
const EnvHelmBin = "TALON_HELM_BIN"

// HelmBinary returns the path of the helm binary: $TALON_HELM_BIN when set,
// otherwise the one build-helm.sh builds (or finds in its cache). It fails t
// when neither yields an executable file; it never skips.
func HelmBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvHelmBin); p != "" {
		if err := checkExecutable(p); err != nil {
			t.Fatalf("testenv: %s=%q: %v (unset it to build helm with internal/testenv/build-helm.sh)", EnvHelmBin, p, err)
		}
		return p
	}
	p, err := buildHelm()
	if err != nil {
		t.Fatalf("testenv: helm not found: %s is unset and building it failed: %v", EnvHelmBin, err)
	}
	if err := checkExecutable(p); err != nil {
		t.Fatalf("testenv: build-helm.sh printed %q: %v", p, err)
	}
	return p
}

func buildHelm() (string, error) {
	servers, err := buildScript()
	if err != nil {
		return "", err
	}
	script := filepath.Join(filepath.Dir(servers), "build-helm.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", script)
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
