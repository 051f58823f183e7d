package admin

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
)

// TestTokenFileWrittenInTwoStepsNoPrefix: a token file rewritten in place
// in two writes (a writer that does not rename into place), read between
// them, never makes a prefix of the new token valid: the half-written
// file's last line has no newline, so it is not taken until the second
// write completes it, and then the whole token works. Before, the reload
// took the first half's "new:read:<prefix>" as a token.
func TestTokenFileWrittenInTwoStepsNoPrefix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("viewer:read:"+tokReader+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := exposeAll()
	toks, err := config.ReadAdminTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TokenFile, cfg.FileTokens = path, toks
	e := startCoordinator(t, envOptions{admin: cfg})

	const newToken = "fresh-token-0123456789abcdef"
	whole := "viewer:read:" + tokReader + "\nfresh:read:" + newToken + "\n"
	cut := strings.Index(whole, newToken) + 10 // mid-token
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteString(whole[:cut]); err != nil {
		t.Fatal(err)
	}
	prefix := newToken[:10]
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if r := e.do(t, http.MethodGet, apiv1.PathNodes, prefix); r.status != http.StatusUnauthorized {
			t.Fatalf("the prefix %q of a token being written: %d, want 401", prefix, r.status)
		}
		if r := e.do(t, http.MethodGet, apiv1.PathNodes, tokReader); r.status != http.StatusOK {
			t.Fatalf("a token of the previous file while the new one is written: %d, want 200", r.status)
		}
	}
	if _, err := f.WriteString(whole[cut:]); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, newToken, http.StatusOK, 3*time.Second)
	if r := e.do(t, http.MethodGet, apiv1.PathNodes, prefix); r.status != http.StatusUnauthorized {
		t.Fatalf("the prefix after the write: %d, want 401", r.status)
	}
	if logs := e.logs.String(); strings.Count(logs, "its last line has no newline") != 1 || strings.Contains(logs, prefix) {
		t.Fatalf("want one warning about the unterminated file, naming no token:\n%s", logs)
	}
}

// TestTokenFileWithoutFinalNewlineSettles: a file written without a
// final newline (printf, a shell's $(...)) is still taken, once it has
// stayed unchanged for tokenFileSettle.
func TestTokenFileWithoutFinalNewlineSettles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("viewer:read:"+tokReader), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := exposeAll()
	toks, err := config.ReadAdminTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TokenFile, cfg.FileTokens = path, toks
	e := startCoordinator(t, envOptions{admin: cfg})
	if r := e.do(t, http.MethodGet, apiv1.PathNodes, tokReader); r.status != http.StatusOK {
		t.Fatalf("a file without a final newline at start: %d, want 200", r.status)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("viewer:read:"+tokReader+"\nops:read:"+tokOps), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, tokOps, http.StatusOK, 5*time.Second)
}

func waitStatus(t *testing.T, e *env, token string, want int, within time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		r := e.do(t, http.MethodGet, apiv1.PathNodes, token)
		if r.status == want {
			t.Logf("%d after %s", want, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > within {
			t.Fatalf("still %d after %s, want %d", r.status, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
