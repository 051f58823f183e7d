package cliconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
		err  bool
	}{
		{"xdg", map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/talon/talonctl.yaml", false},
		{"home fallback", map[string]string{"HOME": "/h"}, "/h/.config/talon/talonctl.yaml", false},
		{"relative xdg is ignored", map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/h"}, "/h/.config/talon/talonctl.yaml", false},
		{"neither", nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Path(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("Path = %q, %v; want %q, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func writeFile(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, FileName)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadMissing(t *testing.T) {
	f, err := Load(filepath.Join(t.TempDir(), "nope", FileName))
	if err != nil {
		t.Fatal(err)
	}
	if f.Exists() || len(f.Contexts) != 0 || f.CurrentContext != "" {
		t.Fatalf("missing file loaded as %+v", f)
	}
	if err := f.UndefinedError("prod"); !strings.Contains(err.Error(), "there is no config file") {
		t.Fatalf("UndefinedError = %v", err)
	}
}

func TestLoadValid(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, `# my contexts
current-context: dev
contexts:
  - name: dev
    servers: [http://127.0.0.1:7401]
  - name: prod
    servers:
      - https://a:7401
      - https://b:7401
    token-file: secrets/token   # relative to the file
    ca-file: /etc/ca.pem
    timeout: 3s
`)
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Exists() || f.CurrentContext != "dev" || len(f.Contexts) != 2 {
		t.Fatalf("loaded %+v", f)
	}
	if got := f.Names(); strings.Join(got, ",") != "dev,prod" {
		t.Fatalf("Names = %v", got)
	}
	prod, ok := f.Context("prod")
	if !ok {
		t.Fatal("prod not found")
	}
	if prod.TokenFile != filepath.Join(dir, "secrets/token") {
		t.Errorf("token-file = %q, want it relative to the config file", prod.TokenFile)
	}
	if prod.CAFile != "/etc/ca.pem" || prod.TimeoutDuration != 3*time.Second || len(prod.Servers) != 2 {
		t.Errorf("prod = %+v", prod)
	}
	if _, ok := f.Context("nope"); ok {
		t.Error("Context(nope) found")
	}
	if err := f.UndefinedError("nope"); !strings.Contains(err.Error(), "(defined: dev, prod)") {
		t.Errorf("UndefinedError = %v", err)
	}
}

func TestLoadEmptyFile(t *testing.T) {
	f, err := Load(writeFile(t, t.TempDir(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Exists() || len(f.Contexts) != 0 {
		t.Fatalf("loaded %+v", f)
	}
}

func TestLoadInvalid(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"unknown key", "contexts:\n  - name: a\n    servers: [x]\n    sever: y\n", "field sever not found"},
		{"unknown top key", "current-contxt: a\n", "field current-contxt not found"},
		{"no name", "contexts:\n  - servers: [x]\n", `contexts[0].name "": must not be empty`},
		{"duplicate", "contexts:\n  - name: a\n    servers: [x]\n  - name: a\n    servers: [y]\n", `contexts[1].name "a": must be unique`},
		{"no servers", "contexts:\n  - name: a\n", `context "a": servers: must list at least one`},
		{"empty server", "contexts:\n  - name: a\n    servers: [\"\"]\n", `servers[0] "": must not be empty`},
		{"bad timeout", "contexts:\n  - name: a\n    servers: [x]\n    timeout: soon\n", `timeout "soon": must be a positive duration`},
		{"negative timeout", "contexts:\n  - name: a\n    servers: [x]\n    timeout: -1s\n", `timeout "-1s": must be a positive duration`},
		{"ca and insecure", "contexts:\n  - name: a\n    servers: [x]\n    ca-file: c\n    insecure-skip-tls-verify: true\n", "set at most one"},
		{"not yaml", "contexts: [\n", "config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), tt.content)
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Load error = %v, want it to name the file and contain %q", err, tt.want)
			}
		})
	}
}

func TestSaveKeepsDocument(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, `# team contexts, edit by hand
contexts:
  - name: dev # local
    servers: [http://127.0.0.1:7401]
  - name: prod
    servers: [https://a:7401]
    token-file: tok
`)
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetCurrentContext("nope"); err == nil {
		t.Fatal("SetCurrentContext(nope) succeeded")
	}
	for _, name := range []string{"prod", "dev"} { // append the key, then replace it
		if err := f.SetCurrentContext(name); err != nil {
			t.Fatal(err)
		}
		if err := f.Save(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, want := range []string{"# team contexts, edit by hand", "# local", "current-context: " + name, "token-file: tok"} {
			if !strings.Contains(s, want) {
				t.Errorf("saved file lacks %q:\n%s", want, s)
			}
		}
		if strings.Count(s, "current-context") != 1 {
			t.Errorf("saved file has current-context %d times:\n%s", strings.Count(s, "current-context"), s)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("mode = %v, want 0600", st.Mode().Perm())
		}
		again, err := Load(p)
		if err != nil {
			t.Fatalf("reloading the saved file: %v", err)
		}
		if again.CurrentContext != name || len(again.Contexts) != 2 {
			t.Errorf("reloaded %+v", again)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after saving, want only the file (no temporary files)", len(entries))
	}
}

func TestSaveNewFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "new", "talon", FileName)
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	f.CurrentContext = "x"
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode = %v, want 0700", st.Mode().Perm())
	}
	b, _ := os.ReadFile(p)
	if string(b) != "current-context: x\n" {
		t.Errorf("new file = %q", b)
	}
}

// TestEditKeepsDocument edits contexts of a commented file: the edits land,
// everything else (comments, relative names) is kept, and an edit that
// would make the file invalid changes nothing.
func TestEditKeepsDocument(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, `# my contexts
current-context: dev
contexts:
  - name: dev # the laptop
    servers: [http://127.0.0.1:7401]
    token-file: dev-token # relative
  - name: old
    servers: [http://old:7401]
`)
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	tf := "/abs/token"
	if created, err := f.SetContext("prod", ContextSettings{Servers: []string{"https://a:7401"}, TokenFile: &tf}); err != nil || !created {
		t.Fatalf("SetContext prod: %v, created %v", err, created)
	}
	timeout := "3s"
	if created, err := f.SetContext("dev", ContextSettings{Timeout: &timeout}); err != nil || created {
		t.Fatalf("SetContext dev: %v, created %v", err, created)
	}
	if err := f.RenameContext("dev", "laptop"); err != nil {
		t.Fatal(err)
	}
	if cur, err := f.DeleteContext("old"); err != nil || cur {
		t.Fatalf("DeleteContext old: %v, was current %v", err, cur)
	}
	insecure := true
	if _, err := f.SetContext("prod", ContextSettings{InsecureSkipTLSVerify: &insecure, CAFile: &tf}); err == nil ||
		!strings.Contains(err.Error(), "ca-file and insecure-skip-tls-verify: set at most one") {
		t.Fatalf("invalid edit: %v", err)
	}
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	for _, want := range []string{"# my contexts", "current-context: laptop", "name: laptop # the laptop", "token-file: dev-token # relative", "timeout: 3s", "name: prod", "token-file: /abs/token"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("file lacks %q:\n%s", want, b)
		}
	}
	for _, gone := range []string{"old", "insecure"} {
		if strings.Contains(string(b), gone) {
			t.Errorf("file still has %q:\n%s", gone, b)
		}
	}
	g, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(g.Names(), ",") != "laptop,prod" || g.CurrentContext != "laptop" {
		t.Fatalf("reloaded: %v, current %q", g.Names(), g.CurrentContext)
	}
	if c, _ := g.Context("laptop"); c.TokenFile != filepath.Join(dir, "dev-token") || c.TimeoutDuration != 3*time.Second {
		t.Fatalf("laptop: %+v", c)
	}
}
