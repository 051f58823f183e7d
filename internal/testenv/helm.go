package testenv

import (
	"os"
	"path/filepath"
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
	return runBuildScript(filepath.Join(filepath.Dir(servers), "build-helm.sh"))
}
