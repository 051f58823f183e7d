package cmdutil

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cliconfig"
)

// ServerCacheTTL is how long talonctl trusts what an earlier invocation
// learned about a connection's servers (which answered, which did not):
// short, as kubectl's discovery cache is, since coordinators come and go.
const ServerCacheTTL = 5 * time.Minute

// serverCacheKind marks talonctl's server cache files; a file without it
// is foreign and ignored.
const serverCacheKind = "talonctl-servers/v1"

// serverCache is the file of one connection's server memory under
// $XDG_CACHE_HOME/talonctl/ (default ~/.cache/talonctl/): one file per
// context and server list, so that invocations on different contexts
// never overwrite each other's. It is a cache: a missing, corrupt, foreign
// or expired file is ignored, and a failure to write it is too.
type serverCache struct {
	Kind     string               `json:"kind"`
	Key      string               `json:"key"`
	SavedAt  time.Time            `json:"savedAt"`
	Answered string               `json:"answered,omitempty"`
	Silent   map[string]time.Time `json:"silent,omitempty"`
}

// serverCacheKey identifies a connection's servers: the context (if any)
// and the server list in failover order.
func serverCacheKey(conn *Connection) string {
	return conn.ContextName + "\n" + strings.Join(conn.Servers, ",")
}

// serverCachePath returns the cache file of key, or "" when there is no
// cache directory (neither XDG_CACHE_HOME, absolute, nor HOME is set).
func serverCachePath(getenv func(string) string, key string) string {
	dir := ""
	switch x := getenv("XDG_CACHE_HOME"); {
	case x != "" && filepath.IsAbs(x):
		dir = x
	case getenv("HOME") != "":
		dir = filepath.Join(getenv("HOME"), ".cache")
	default:
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(dir, "talonctl", "servers-"+hex.EncodeToString(sum[:8])+".json")
}

// loadServerMemory returns a memory for conn's servers, seeded from the
// cache file at path when it holds a fresh entry for key.
func loadServerMemory(path, key string, now func() time.Time) *apiv1.ServerMemory {
	m := apiv1.NewServerMemory(now)
	if path == "" {
		return m
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	var c serverCache
	if json.Unmarshal(b, &c) != nil || c.Kind != serverCacheKind || c.Key != key {
		return m // corrupt or foreign: a cache, not an error
	}
	t := now()
	if age := t.Sub(c.SavedAt); age < 0 || age > ServerCacheTTL {
		return m
	}
	silent := map[string]time.Time{}
	for s, at := range c.Silent {
		if age := t.Sub(at); age >= 0 && age <= ServerCacheTTL {
			silent[s] = at
		}
	}
	m.Seed(c.Answered, silent)
	return m
}

// saveServerMemory writes m's snapshot for key to path: a temporary file
// renamed over the old one, so that concurrent invocations leave one
// whole file, the last writer's.
func saveServerMemory(path, key string, m *apiv1.ServerMemory, now time.Time) {
	if path == "" || m == nil {
		return
	}
	answered, silent := m.Snapshot()
	b, err := json.Marshal(serverCache{Kind: serverCacheKind, Key: key, SavedAt: now, Answered: answered, Silent: silent})
	if err != nil {
		return
	}
	_ = cliconfig.WriteFileAtomic(path, append(b, '\n'))
}
