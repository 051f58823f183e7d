package testsupport

import (
	"os"
	"os/exec"

	"github.com/talonhq/talon/internal/deptest"
)

// GoBuild returns the command that builds the main package pkg into out,
// run in dir (the current directory when dir is ""), the way a release
// does: CGO off, -trimpath and the release tags. Every test that builds a
// binary uses it, so that the binaries' packages compile once per run in
// the flavour the test servers and the previous release are built in
// (internal/testenv), instead of once per set of flags.
func GoBuild(dir, out, pkg string) *exec.Cmd {
	cmd := exec.Command("go", "build", "-trimpath", "-tags", deptest.ReleaseTags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}
