package config

import (
	"strings"
	"testing"
)

// TestParseAdminTokens: scoped lines, bare lines of the old format (read
// and metrics, named by their line), and errors that name the line and
// never the token.
func TestParseAdminTokens(t *testing.T) {
	toks, err := ParseAdminTokens("# comment\n\nops:read,operate,metrics:tok-1:with:colons\n  prom:metrics:tok-2  \nbare-token-3\n", "f")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name   string
		scopes AdminScope
		token  string
	}{
		{"ops", ScopeRead | ScopeOperate | ScopeMetrics, "tok-1:with:colons"},
		{"prom", ScopeMetrics, "tok-2"},
		{"line-5", ScopeRead | ScopeMetrics, "bare-token-3"},
	}
	if len(toks) != len(want) {
		t.Fatalf("%d tokens, want %d", len(toks), len(want))
	}
	for i, w := range want {
		if toks[i].Name != w.name || toks[i].Scopes != w.scopes || toks[i].Token.Reveal() != w.token {
			t.Errorf("token %d: %s %s, want %s %s", i, toks[i].Name, toks[i].Scopes, w.name, w.scopes)
		}
	}
	if s := toks[0].Scopes.String(); s != "read,operate,metrics" {
		t.Errorf("scopes %q", s)
	}
	for _, tt := range []struct{ text, want string }{
		{"", `f holds no token`},
		{"# only\n", `f holds no token`},
		{"ops:admin:SECRET", `f line 1: want name:scope[,scope...]:token`},
		{"SECRET:half", `f line 1: want name:scope[,scope...]:token`},
		{"ops::SECRET", `f line 1: want name:scope[,scope...]:token`},
		{"-ops:read:SECRET", `f line 1: name "-ops": must be 1 to 64 bytes`},
		{"ops:read:", `f line 1: token "ops" has no token after its scopes`},
		{"ops:read:SECRET1\nops:metrics:SECRET2", `f line 2: name "ops" is already the name of line 1`},
		{"a:read:SECRET\nb:operate:SECRET", `f line 2: the token of line 1 again`},
	} {
		_, err := ParseAdminTokens(tt.text, "f")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.text, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: the error shows the token: %v", tt.text, err)
		}
	}
	if tok, err := ParseAdminToken(" ci:read:tok-4 ", "env"); err != nil || tok.Name != "ci" || tok.Scopes != ScopeRead {
		t.Errorf("one scoped token: %+v %v", tok, err)
	}
	if tok, err := ParseAdminToken("tok-5", "env"); err != nil || tok.Name != "env" || tok.Scopes != LegacyScopes {
		t.Errorf("one bare token: %+v %v", tok, err)
	}
}
