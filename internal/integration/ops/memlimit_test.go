package ops

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestMemoryLimitFromCgroup runs a coordinator in a memory cgroup (v1)
// limited to 512 MiB: it logs a soft memory limit of 90% of that, read by
// the library from the kernel's files. It is skipped where the test cannot
// make a memory cgroup (not root, or no v1 memory controller). The unit
// test of the rule is internal/app's TestSetMemoryLimit.
func TestMemoryLimitFromCgroup(t *testing.T) {
	talontest.SkipShort(t)
	dir := memoryCgroup(t, 512<<20)
	ctl := talontest.FreeAddr(t)
	args := talontest.CoordinatorArgs("memlimit", ctl, talontest.FreeAddr(t))
	// The shell joins the cgroup before it becomes talon, so talon starts
	// in it and reads its limit.
	cmd := exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir, talontest.Binary(t)}, args...)...)
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=", "AUTOMEMLIMIT=")
	var out testsupport.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("coordinator output:\n%s", talontest.Tail(out.String(), 4000))
		}
	})
	limit := int64(512 << 20)
	want := fmt.Sprintf("limit_bytes=%d container_limit_bytes=%d", int64(float64(limit)*0.9), limit)
	testsupport.WaitFor(t, time.Minute, "the coordinator's soft memory limit logged", func() bool {
		return strings.Contains(out.String(), want)
	})
}

// memoryCgroup makes a child of the test process's v1 memory cgroup
// limited to limit bytes, removed when the test ends, or skips the test.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	var path string
	for line := range strings.SplitSeq(string(self), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "memory") {
			path = f[2]
		}
	}
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "memory.limit_in_bytes")); err != nil || path == "" {
		t.Skip("no cgroup v1 memory controller")
	}
	dir := filepath.Join(root, path, fmt.Sprintf("talon-memlimit-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		// rmdir succeeds once the cgroup's processes are gone.
		testsupport.WaitFor(t, 10*time.Second, "the test cgroup removed", func() bool { return os.Remove(dir) == nil })
	})
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("limit the test cgroup: %v", err)
	}
	return dir
}
