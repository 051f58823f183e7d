package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
)

// credential is one accepted token: its name, its scopes and the SHA-256
// digest of the token. Comparing fixed-size digests in constant time hides
// the tokens' lengths as well as their contents, and the plaintext is not
// kept in the server at all.
type credential struct {
	name   string
	scopes config.AdminScope
	digest [sha256.Size]byte
}

func credentialsOf(tokens []config.AdminToken) []credential {
	out := make([]credential, 0, len(tokens))
	for _, t := range tokens {
		if t.Token.IsSet() {
			out = append(out, credential{name: t.Name, scopes: t.Scopes, digest: sha256.Sum256([]byte(t.Token.Reveal()))})
		}
	}
	return out
}

// principal is who a request authenticated as, and what it may do.
type principal struct {
	// name is the token's name; anonymous when no token is configured
	// (reads are open then); "" when a token is required and none valid
	// was presented.
	name   string
	scopes config.AdminScope
}

type principalKey struct{}

// principalOf returns the name of the principal a request being served
// authenticated as ("" if none).
func principalOf(ctx context.Context) string {
	name, _ := ctx.Value(principalKey{}).(string)
	return name
}

// anonymous names a caller of a listener without tokens.
const anonymous = "(anonymous)"

// openScopes are what anyone may do on a listener without tokens: read,
// as before scopes. Never operate: a state-changing route always needs a
// token that holds the operate scope.
const openScopes = config.ScopeRead | config.ScopeMetrics

// authenticator checks bearer tokens against the static ones
// (TALON_ADMIN_TOKEN) and those of the token file. It reads the file
// again when it changed, checked at most once per pki.DefaultCheckInterval
// on a request, as a pki.Source does its TLS files: a removed token is
// refused within that interval, with no restart. A file that no longer
// loads keeps the previous tokens, with a warning (as a TLS file does).
type authenticator struct {
	static   []credential // immutable
	required bool         // immutable: tokens were configured at start
	file     *tokenFile   // nil without a token file
}

func newAuthenticator(cfg config.AdminConfig, log *slog.Logger, now func() time.Time) *authenticator {
	a := &authenticator{static: credentialsOf(cfg.Tokens)}
	a.required = len(a.static) > 0 || cfg.TokenFile != "" || len(cfg.FileTokens) > 0
	if cfg.TokenFile != "" {
		a.file = newTokenFile(cfg.TokenFile, cfg.FileTokens, log, now)
	}
	return a
}

// enabled reports whether tokens are required.
func (a *authenticator) enabled() bool { return a.required }

// current returns every credential accepted now.
func (a *authenticator) current() []credential {
	if a.file == nil {
		return a.static
	}
	return append(a.file.current(), a.static...)
}

// check returns who r authenticated as, and whether it presented a bearer
// token at all. Every credential is compared, whatever matched earlier, so
// the time taken does not depend on which one matched.
func (a *authenticator) check(r *http.Request) (p principal, presented bool) {
	if !a.required {
		return principal{name: anonymous, scopes: openScopes}, r.Header.Get("Authorization") != ""
	}
	h := r.Header.Get("Authorization")
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return principal{}, h != ""
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return principal{}, true
	}
	d := sha256.Sum256([]byte(token))
	creds := a.current()
	match := -1
	for i, c := range creds {
		eq := subtle.ConstantTimeCompare(d[:], c.digest[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return principal{}, true
	}
	return principal{name: creds[match].name, scopes: creds[match].scopes}, true
}

// challenge is the WWW-Authenticate value of a 401 (RFC 6750).
func challenge(presented bool) string {
	if presented {
		return `Bearer realm="talon-admin", error="invalid_token"`
	}
	return `Bearer realm="talon-admin"`
}

// tokenFileSettle is how long a token file whose last line has no
// newline must keep its size and modification time before a reload takes
// it: such a file may be a write still in progress, and its last token a
// prefix of the one being written (a prefix was accepted). A complete
// file (every line ends with a newline) is taken at once. Kubernetes
// Secret volumes and writers that rename into place are always complete;
// a file written without a final newline (printf, $(...)) is still taken,
// settle later.
const tokenFileSettle = 2 * time.Second

// tokenFile is the admin token file, read again when it changes.
type tokenFile struct {
	path     string
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration
	settle   time.Duration

	cur atomic.Pointer[[]credential]

	mu        sync.Mutex // guards the fields below; serialises reloads
	lastCheck time.Time
	stamp     pki.Stamps // the file as last taken
	// unsettled is an unterminated file's stamp seen at unsettledSince,
	// not yet taken.
	unsettled      pki.Stamps
	unsettledSince time.Time
	lastErr        string // the last reload failure logged
}

func newTokenFile(path string, initial []config.AdminToken, log *slog.Logger, now func() time.Time) *tokenFile {
	f := &tokenFile{path: path, log: log, now: now, interval: pki.DefaultCheckInterval, settle: tokenFileSettle, lastCheck: now()}
	creds := credentialsOf(initial)
	f.cur.Store(&creds)
	f.stamp, _ = pki.StampFiles(path) // nil on error: the first check reloads
	return f
}

// current returns the file's credentials, first reading the file again
// when a check is due and it changed.
func (f *tokenFile) current() []credential {
	cur := *f.cur.Load()
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.lastCheck) < f.interval {
		return cur
	}
	f.lastCheck = now
	st, err := pki.StampFiles(f.path)
	if err == nil && st.Equal(f.stamp) {
		return cur
	}
	toks, unterminated, err := config.ReloadAdminTokenFile(f.path)
	if err != nil {
		f.warnOnce("admin-token-file changed but does not load; keeping the previous tokens", err)
		return cur
	}
	if after, serr := pki.StampFiles(f.path); serr != nil || !after.Equal(st) {
		return cur // changed while read: read it again at the next check
	}
	if unterminated && !f.settled(st, now) {
		f.warnOnce(fmt.Sprintf("admin-token-file changed and its last line has no newline (a write in progress?); keeping the previous tokens until it stays unchanged for %s", f.settle), nil)
		return cur
	}
	creds := credentialsOf(toks)
	f.cur.Store(&creds)
	f.stamp, f.lastErr, f.unsettled = st, "", nil
	f.log.Info("admin tokens reloaded", "file", f.path, "tokens", len(creds))
	return creds
}

// settled reports whether the file has had stamp st for f.settle, and
// starts timing it when st is new. Called with mu held.
func (f *tokenFile) settled(st pki.Stamps, now time.Time) bool {
	if f.unsettled == nil || !st.Equal(f.unsettled) {
		f.unsettled, f.unsettledSince = st, now
		return false
	}
	return now.Sub(f.unsettledSince) >= f.settle
}

// warnOnce logs msg (and err) unless it was the last reload problem
// logged. Called with mu held.
func (f *tokenFile) warnOnce(msg string, err error) {
	key := msg
	if err != nil {
		key += err.Error()
	}
	if key == f.lastErr {
		return
	}
	f.lastErr = key
	if err != nil {
		f.log.Warn(msg, "error", err)
		return
	}
	f.log.Warn(msg, "file", f.path)
}
