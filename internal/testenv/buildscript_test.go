package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildScriptUsesInstalledBinaries: an etcd and a kube-apiserver on
// PATH that report the pinned versions are used instead of building, and
// the script says so; one of another version is not picked up.
func TestBuildScriptUsesInstalledBinaries(t *testing.T) {
	script, err := buildScript()
	if err != nil {
		t.Fatal(err)
	}
	fake := t.TempDir()
	write := func(name, version string) {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\necho '"+version+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (string, string) {
		cache := t.TempDir()
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "TALON_TESTBIN_CACHE="+cache)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("build-servers.sh %v: %v\n%s", args, err, stderr.String())
		}
		return strings.TrimSpace(string(out)), stderr.String()
	}
	write("kube-apiserver", "Kubernetes v1.37.2")
	dir, stderr := run("kube-apiserver")
	target, err := os.Readlink(filepath.Join(dir, "kube-apiserver"))
	if err != nil || target != filepath.Join(fake, "kube-apiserver") || !strings.Contains(stderr, "(the pinned version)") {
		t.Fatalf("installed kube-apiserver not used: link %q %v\n%s", target, err, stderr)
	}
	// Another version is not used: the script builds instead (here with a
	// go command that fails at once, so the attempt shows in its output).
	write("kube-apiserver", "Kubernetes v1.30.0")
	goFake := filepath.Join(fake, "fake-go")
	if err := os.WriteFile(goFake, []byte("#!/bin/sh\ncase \"$1 $2\" in\n'env GOVERSION') echo go1.26;;\n'env GOOS') echo linux;;\n'env GOARCH') echo amd64;;\n*) exit 1;;\nesac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "kube-apiserver")
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "TALON_TESTBIN_CACHE="+t.TempDir(), "GO="+goFake)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "building kube-apiserver") || strings.Contains(string(out), "pinned version") {
		t.Fatalf("a kube-apiserver of another version was used (err %v):\n%s", err, out)
	}
}

// TestBuildPreviousChoosesRelease: the previous release is
// TALON_PREVIOUS_RELEASE when set, else the commit the repo names (no tag
// yet), and a revision the clone lacks fails with what to do.
func TestBuildPreviousChoosesRelease(t *testing.T) {
	run := func(env ...string) (string, string, error) {
		cmd := exec.Command("bash", "build-previous.sh", "--print-ref")
		cmd.Env = append(os.Environ(), env...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return strings.TrimSpace(out.String()), errOut.String(), err
	}
	named, err := os.ReadFile("previous-release")
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, line := range strings.Split(string(named), "\n") {
		if c, ok := strings.CutPrefix(line, "commit: "); ok {
			want = strings.TrimSpace(c)
		}
	}
	if tags, _ := exec.Command("git", "tag").Output(); len(strings.TrimSpace(string(tags))) == 0 {
		out, stderr, err := run("TALON_PREVIOUS_RELEASE=")
		if err != nil || !strings.HasPrefix(out, want+" ") {
			t.Fatalf("default previous release: %q (%v, %s); want the named commit %s", out, err, stderr, want)
		}
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	if out, stderr, err := run("TALON_PREVIOUS_RELEASE=HEAD"); err != nil || !strings.HasPrefix(out, strings.TrimSpace(string(head))+" ") {
		t.Fatalf("TALON_PREVIOUS_RELEASE=HEAD: %q (%v, %s)", out, err, stderr)
	}
	if _, stderr, err := run("TALON_PREVIOUS_RELEASE=0000000000000000000000000000000000000bad"); err == nil || !strings.Contains(stderr, "not in this clone's history") {
		t.Fatalf("a revision the clone lacks: %v, %q; want a failure saying so", err, stderr)
	}
}
