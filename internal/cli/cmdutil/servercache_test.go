package cmdutil

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
)

// TestServerCacheFile: what one invocation saves the next loads; an
// expired entry is ignored; concurrent writers leave one whole file.
func TestServerCacheFile(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	dir := t.TempDir()
	getenv := func(k string) string { return map[string]string{"XDG_CACHE_HOME": dir}[k] }
	path := serverCachePath(getenv, "ctx\nhttp://a,http://b")
	m := apiv1.NewServerMemory(clock)
	m.Seed("http://b", map[string]time.Time{"http://a": now})
	saveServerMemory(path, "ctx\nhttp://a,http://b", m, now)
	answered, silent := loadServerMemory(path, "ctx\nhttp://a,http://b", clock).Snapshot()
	if answered != "http://b" || len(silent) != 1 {
		t.Fatalf("loaded %q %v: want what was saved", answered, silent)
	}
	if a, _ := loadServerMemory(path, "other", clock).Snapshot(); a != "" {
		t.Fatalf("another key's file loaded: %q", a)
	}
	late := func() time.Time { return now.Add(ServerCacheTTL + time.Second) }
	if a, _ := loadServerMemory(path, "ctx\nhttp://a,http://b", late).Snapshot(); a != "" {
		t.Fatalf("expired file loaded: %q", a)
	}

	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := apiv1.NewServerMemory(clock)
			m.Seed(fmt.Sprintf("http://s%d", i), nil)
			saveServerMemory(path, "k", m, now)
		}()
	}
	wg.Wait()
	if a, _ := loadServerMemory(path, "k", clock).Snapshot(); a == "" {
		b, _ := os.ReadFile(path)
		t.Fatalf("after concurrent writers the file is not one whole write: %s", b)
	}
	if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
}
