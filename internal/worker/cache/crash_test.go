package cache_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/stats"
)

const (
	crashChildEnv = "TALON_CACHE_CRASH_CHILD" // the cache directory
	crashBlobsEnv = "TALON_CACHE_CRASH_BLOBS" // the blob directory
)

// stallingStore serves object "slow" as half a block and then nothing,
// forever, so the child process is caught in the middle of writing it.
type stallingStore struct{ blob.Store }

func (s stallingStore) ReadRange(ctx context.Context, object string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Store.ReadRange(ctx, object, off, n)
	if err != nil || object != "slow" {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, n/2), stall{}), rc}, nil
}

type stall struct{}

func (stall) Read([]byte) (int, error) { select {} }

// crashChild runs in the re-executed test binary: it caches block 0 of
// "fast", then starts loading block 0 of "slow" and hangs there until the
// parent kills it.
func crashChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	src, err := blob.NewFile(os.Getenv(crashBlobsEnv))
	if err != nil {
		fail(err)
	}
	c, err := cache.Open(cache.Config{
		Dir: os.Getenv(crashChildEnv), Capacity: 1 << 20, BlockSize: bs,
		Source: stallingStore{src}, Stats: stats.New(), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fail(err)
	}
	// Loads write whole buffers: with the default (a MiB, more than a
	// block here) the half block would stay in memory.
	c.SetLoadBuffer(bs / 8)
	b, err := c.ReadBlock(context.Background(), "fast", 0)
	if err != nil {
		fail(err)
	}
	b.Close()
	fmt.Println("fast cached")
	_, err = c.ReadBlock(context.Background(), "slow", 0)
	fail(fmt.Errorf("ReadBlock(slow) returned: %v", err))
}

func TestCrashWhileLoading(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	e := newEnv(t)
	fast, slow := pattern(1, bs+100), pattern(2, 2*bs)
	e.put(t, "fast", fast)
	e.put(t, "slow", slow)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+e.cacheDir, crashBlobsEnv+"="+e.blobDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	wait := func() error {
		waited = true
		return cmd.Wait()
	}
	t.Cleanup(func() {
		if !waited {
			cmd.Process.Kill()
			wait()
		}
	})
	fail := func(format string, args ...any) {
		t.Helper()
		cmd.Process.Kill()
		wait()
		t.Fatalf(format+"; child stderr:\n%s", append(args, stderr.String())...)
	}
	// First the fast block is cached (its load also used a temporary
	// file, so the file alone does not say which load is under way).
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "fast cached\n" {
		fail("child said %q, %v", line, err)
	}
	// Then wait until the child has written the header placeholder and
	// half of the slow block into its temporary file.
	want := cache.HeaderLen("slow") + bs/2
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, temps := cacheFiles(t, e.cacheDir)
		if len(temps) == 1 && sum(temps) >= want {
			break
		}
		if time.Now().After(deadline) {
			fail("child never got half way through the slow block")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v; stderr %q", err, stderr.String())
	}
	blocks, temps := cacheFiles(t, e.cacheDir)
	if len(blocks) != 1 || len(temps) != 1 {
		t.Fatalf("after the kill: blocks %v temps %v; want the fast block and one partial temp file", blocks, temps)
	}
	var tempPath string
	for p := range temps {
		tempPath = p
	}

	c := e.open(t, 1<<20, bs)
	if _, err := os.Stat(tempPath); !os.IsNotExist(err) {
		t.Fatalf("the partial temporary file survived Open: %v", err)
	}
	wantBlock(t, c, "fast", 0, fast)
	if n := e.src.reads.Load(); n != 0 {
		t.Fatalf("the block cached before the crash was fetched again (%d reads)", n)
	}
	wantBlock(t, c, "slow", 0, slow)
	if n := e.src.reads.Load(); n != 1 {
		t.Fatalf("backend reads = %d, want 1: the interrupted block must be loaded anew", n)
	}
	if _, ctr := e.st.Status(); ctr.HitsTotal != 1 || ctr.MissesTotal != 1 {
		t.Fatalf("after restart: %+v, want 1 hit (fast) and 1 miss (slow)", ctr)
	}
}

// damage is a way to spoil a block file between two runs.
type damage struct {
	name string
	do   func(t *testing.T, path string)
	// atOpen: Open deletes the file; otherwise the first read does.
	atOpen bool
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

var damages = []damage{
	{"truncated by one byte", func(t *testing.T, p string) { rewrite(t, p, func(b []byte) []byte { return b[:len(b)-1] }) }, true},
	{"truncated to half", func(t *testing.T, p string) { rewrite(t, p, func(b []byte) []byte { return b[:len(b)/2] }) }, true},
	{"truncated inside the header", func(t *testing.T, p string) { rewrite(t, p, func(b []byte) []byte { return b[:20] }) }, true},
	{"empty", func(t *testing.T, p string) { rewrite(t, p, func(b []byte) []byte { return nil }) }, true},
	{"padded", func(t *testing.T, p string) { rewrite(t, p, func(b []byte) []byte { return append(b, 0) }) }, true},
	{"header byte flipped", func(t *testing.T, p string) { rewrite(t, p, func(b []byte) []byte { b[30] ^= 1; return b }) }, true},
	{"data byte flipped", func(t *testing.T, p string) {
		rewrite(t, p, func(b []byte) []byte { b[len(b)-7] ^= 0x40; return b })
	}, false},
	{"data zeroed", func(t *testing.T, p string) {
		rewrite(t, p, func(b []byte) []byte { clear(b[cache.HeaderLen("obj"):]); return b })
	}, false},
	{"moved to another index", func(t *testing.T, p string) {
		if err := os.Rename(p, strings.Replace(p, "-0.blk", "-1.blk", 1)); err != nil {
			t.Fatal(err)
		}
	}, true},
}

func TestRestartDiscardsDamagedBlocks(t *testing.T) {
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			e := newEnv(t)
			data := pattern(5, bs+300)
			e.put(t, "obj", data)
			c := e.open(t, 1<<20, bs)
			wantBlock(t, c, "obj", 0, data)
			path := c.BlockPath("obj", 0)
			c.Close()

			d.do(t, path)
			e.st = stats.New()
			reads := e.src.reads.Load()
			c = e.open(t, 1<<20, bs)
			_, err := os.Stat(path)
			if d.atOpen != os.IsNotExist(err) {
				t.Fatalf("after Open the damaged file exists=%v, want deleted at open=%v", err == nil, d.atOpen)
			}
			wantBlock(t, c, "obj", 0, data)
			if n := e.src.reads.Load() - reads; n != 1 {
				t.Fatalf("backend reads after restart = %d, want 1: the damaged block must be reloaded", n)
			}
			if _, ctr := e.st.Status(); ctr.HitsTotal != 0 || ctr.MissesTotal != 1 {
				t.Fatalf("stats %+v: a damaged block must count as a miss, never a hit", ctr)
			}
			// Damage found by the data checksum on first read is counted.
			if d.name == "data zeroed" && e.st.ChecksumFailures() != 1 {
				t.Fatalf("checksum failures %d, want 1", e.st.ChecksumFailures())
			}
			// The reloaded block is sound and now a hit.
			wantBlock(t, c, "obj", 0, data)
			if blocks, _ := cacheFiles(t, e.cacheDir); len(blocks) != 1 {
				t.Fatalf("block files %v, want exactly the reloaded one", blocks)
			}
		})
	}
}

func TestRestartReusesBlocks(t *testing.T) {
	e := newEnv(t)
	a, b := pattern(1, 3*bs), pattern(2, bs/2)
	e.put(t, "dir/a", a)
	e.put(t, "b", b)
	c := e.open(t, 1<<20, bs)
	for i := range int64(3) {
		wantBlock(t, c, "dir/a", i, a)
	}
	wantBlock(t, c, "b", 0, b)
	capBefore, _ := e.st.Status()
	c.Close()

	// Leftovers of a crash and files that are not the cache's.
	shard := filepath.Dir(c.BlockPath("b", 0))
	temp := filepath.Join(shard, "tmp-12345")
	foreign := filepath.Join(shard, "README")
	foreignTop := filepath.Join(e.cacheDir, "blocks", "lost+found")
	for _, p := range []string{temp, foreign} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(foreignTop, 0o700); err != nil {
		t.Fatal(err)
	}

	e.st = stats.New()
	reads := e.src.reads.Load()
	c = e.open(t, 1<<20, bs)
	capAfter, _ := e.st.Status()
	if capAfter.Blocks != 4 || capAfter.ResidentBytes != capBefore.ResidentBytes {
		t.Fatalf("restored %+v, want the %+v of before the restart", capAfter, capBefore)
	}
	if _, err := os.Stat(temp); !os.IsNotExist(err) {
		t.Fatalf("temporary file survived Open: %v", err)
	}
	for _, p := range []string{foreign, foreignTop} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("Open deleted %s, which is not the cache's: %v", p, err)
		}
	}
	for i := range int64(3) {
		wantBlock(t, c, "dir/a", i, a)
	}
	wantBlock(t, c, "b", 0, b)
	if _, ctr := e.st.Status(); ctr.HitsTotal != 4 || ctr.MissesTotal != 0 || e.src.reads.Load() != reads {
		t.Fatalf("after restart %+v, %d backend reads; want 4 hits and none", ctr, e.src.reads.Load()-reads)
	}
}

func TestRestartWithOtherBlockSizeOrCapacity(t *testing.T) {
	e := newEnv(t)
	data := pattern(1, 8*bs)
	e.put(t, "obj", data)
	c := e.open(t, 1<<20, bs)
	for i := range int64(8) {
		wantBlock(t, c, "obj", i, data)
	}
	c.Close()

	t.Run("smaller capacity evicts", func(t *testing.T) {
		e.st = stats.New()
		const capacity = 3 * (bs + cache.MaxHeaderBytes)
		c := e.open(t, capacity, bs)
		capy, _ := e.st.Status()
		blocks, _ := cacheFiles(t, e.cacheDir)
		if capy.ResidentBytes > capacity || capy.Blocks != 3 || len(blocks) != 3 {
			t.Fatalf("after reopening smaller: %+v, %d files; want 3 blocks within %d bytes", capy, len(blocks), capacity)
		}
		c.Close()
	})
	t.Run("other block size discards", func(t *testing.T) {
		e.st = stats.New()
		c := e.open(t, 1<<20, 2*bs)
		capy, _ := e.st.Status()
		blocks, _ := cacheFiles(t, e.cacheDir)
		if capy.Blocks != 0 || len(blocks) != 0 {
			t.Fatalf("blocks of another block size survived: %+v, files %v", capy, blocks)
		}
		wantBlock(t, c, "obj", 1, data)
	})
}
