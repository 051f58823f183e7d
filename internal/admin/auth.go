package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/talonhq/talon/internal/config"
)

// authenticator checks bearer tokens. It keeps only SHA-256 digests of the
// configured tokens: comparing fixed-size digests in constant time hides
// the tokens' lengths as well as their contents, and the plaintext is not
// kept in the server at all.
type authenticator struct {
	digests [][sha256.Size]byte // immutable after newAuthenticator
}

func newAuthenticator(tokens []config.Secret) *authenticator {
	a := &authenticator{}
	for _, t := range tokens {
		if t.IsSet() {
			a.digests = append(a.digests, sha256.Sum256([]byte(t.Reveal())))
		}
	}
	return a
}

// enabled reports whether tokens are required.
func (a *authenticator) enabled() bool { return len(a.digests) > 0 }

// check reports whether r carries a bearer token (presented) and whether it
// is one of the configured tokens (ok). Every configured token is compared,
// whatever matched earlier, so the time taken does not depend on which
// token matched.
func (a *authenticator) check(r *http.Request) (ok, presented bool) {
	h := r.Header.Get("Authorization")
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return false, h != ""
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return false, true
	}
	d := sha256.Sum256([]byte(token))
	match := 0
	for i := range a.digests {
		match |= subtle.ConstantTimeCompare(d[:], a.digests[i][:])
	}
	return match == 1, true
}

// challenge is the WWW-Authenticate value of a 401 (RFC 6750).
func challenge(presented bool) string {
	if presented {
		return `Bearer realm="talon-admin", error="invalid_token"`
	}
	return `Bearer realm="talon-admin"`
}
