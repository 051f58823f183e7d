package config

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
)

// AdminScope is the set of things an admin credential may do.
type AdminScope uint8

// Admin scopes. A route asks for one; a credential holds any set.
const (
	// ScopeRead reads /api/v1 and the reasons of /readyz.
	ScopeRead AdminScope = 1 << iota
	// ScopeOperate runs the routes that change state (a worker's cordon).
	ScopeOperate
	// ScopeMetrics reads /metrics (what Prometheus needs, nothing more).
	ScopeMetrics
	// ScopeDebug reads the debug routes: goroutine and heap profiles and
	// the effective configuration (secrets redacted). Its own scope: stacks
	// and configuration tell more about a deployment than its API does,
	// and neither a reader nor an operator needs them.
	ScopeDebug
)

// LegacyScopes are the scopes of a bare token line, the format from before
// scopes: everything such a token could do before but change state. A
// token that must change state names its scopes (name:read,operate:token).
const LegacyScopes = ScopeRead | ScopeMetrics

// scopeNames spells each scope, in the order String lists them.
var scopeNames = []struct {
	scope AdminScope
	name  string
}{{ScopeRead, "read"}, {ScopeOperate, "operate"}, {ScopeMetrics, "metrics"}, {ScopeDebug, "debug"}}

// String lists the scopes as a token file spells them ("read,metrics").
func (s AdminScope) String() string {
	var out []string
	for _, n := range scopeNames {
		if s&n.scope != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, ",")
}

// Has reports whether s holds every scope of want.
func (s AdminScope) Has(want AdminScope) bool { return s&want == want }

// ParseAdminScopes parses a comma-separated list of scope names.
func ParseAdminScopes(list string) (AdminScope, error) {
	var s AdminScope
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		found := false
		for _, n := range scopeNames {
			if item == n.name {
				s, found = s|n.scope, true
			}
		}
		if !found {
			return 0, fmt.Errorf("scope %q is not one of read, operate, metrics, debug", shorten(item))
		}
	}
	return s, nil
}

// AdminToken is one bearer token the admin listener accepts and what it
// may do.
type AdminToken struct {
	// Name names the token in audit lines, refusals and metrics; never
	// the token itself.
	Name   string
	Scopes AdminScope
	Token  Secret
}

// maxTokenNameBytes bounds a token's name.
const maxTokenNameBytes = 64

var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ParseAdminTokens parses the text of an admin token file (origin names it
// in errors). One token a line; blank lines and lines starting with # are
// skipped. A line is either
//
//	name:scope[,scope...]:token   e.g. ops:read,operate,metrics:3f9c...
//	token                         a bare token, without ':' (the old format)
//
// A bare token is named "line-N" (its line) and holds LegacyScopes. Names
// and tokens must be unique. Errors name the line, never the token. A file
// of no token is an error: authentication would accept nobody.
func ParseAdminTokens(text, origin string) ([]AdminToken, error) {
	var out []AdminToken
	names := map[string]int{}
	digests := map[[sha256.Size]byte]int{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tok, err := parseTokenLine(line, fmt.Sprintf("line-%d", n))
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", origin, n, err)
		}
		if prev, dup := names[tok.Name]; dup {
			return nil, fmt.Errorf("%s line %d: name %q is already the name of line %d: names must be unique", origin, n, tok.Name, prev)
		}
		d := sha256.Sum256([]byte(tok.Token.Reveal()))
		if prev, dup := digests[d]; dup {
			return nil, fmt.Errorf("%s line %d: the token of line %d again: each token must be on one line only, with all its scopes", origin, n, prev)
		}
		names[tok.Name], digests[d] = n, n
		out = append(out, tok)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no token; authentication would accept nobody", origin)
	}
	return out, nil
}

// ParseAdminToken parses one token given alone (TALON_ADMIN_TOKEN): a
// bare token named bareName, or name:scopes:token.
func ParseAdminToken(line, bareName string) (AdminToken, error) {
	return parseTokenLine(strings.TrimSpace(line), bareName)
}

func parseTokenLine(line, bareName string) (AdminToken, error) {
	if !strings.Contains(line, ":") {
		return AdminToken{Name: bareName, Scopes: LegacyScopes, Token: Secret(line)}, nil
	}
	name, rest, _ := strings.Cut(line, ":")
	list, token, ok := strings.Cut(rest, ":")
	// The fields are echoed only once they are known not to be a bare
	// token's pieces: a token with a ':' must not leak into an error.
	scopes, err := ParseAdminScopes(list)
	switch {
	case !ok || err != nil:
		return AdminToken{}, fmt.Errorf("want name:scope[,scope...]:token with scopes from read, operate, metrics, debug, or a bare token without ':'")
	case len(name) > maxTokenNameBytes || !tokenName.MatchString(name):
		return AdminToken{}, fmt.Errorf("name %q: must be 1 to %d bytes of [A-Za-z0-9._-], starting with a letter or digit", shorten(name), maxTokenNameBytes)
	case strings.TrimSpace(token) == "":
		return AdminToken{}, fmt.Errorf("token %q has no token after its scopes", name)
	}
	return AdminToken{Name: name, Scopes: scopes, Token: Secret(strings.TrimSpace(token))}, nil
}

// shorten cuts s to 64 bytes for an error message.
func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
