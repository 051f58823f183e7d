package cmdutil

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/colorprofile"
	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/apiv1"
)

// resolveWith parses args as the connection flags and resolves them with
// env; the config file lives in a temporary XDG_CONFIG_HOME holding cfg.
func resolveWith(t *testing.T, cfg string, env map[string]string, args ...string) (*Connection, error) {
	t.Helper()
	xdg := t.TempDir()
	if cfg != "" {
		dir := filepath.Join(xdg, "talon")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "talonctl.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, secret := range map[string]string{"ctx-token": "ctx-secret", "flag-token": "flag-secret"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	var c ConnFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "$DIR", filepath.Join(xdg, "talon"))
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return xdg
		}
		return env[k]
	}
	return c.resolve(getenv)
}

const twoContexts = `current-context: file
contexts:
  - name: file
    servers: [http://file:7401]
    token-file: ctx-token
    timeout: 3s
  - name: other
    servers: [http://other-a:7401, http://other-b:7401]
    insecure-skip-tls-verify: true
`

func TestResolvePrecedence(t *testing.T) {
	tests := []struct {
		name        string
		cfg         string
		env         map[string]string
		args        []string
		servers     string
		token       string
		tokenSource string
		context     string
		timeout     time.Duration
		insecure    bool
	}{
		{name: "defaults", servers: DefaultServer, timeout: DefaultTimeout},
		{name: "current context", cfg: twoContexts, servers: "http://file:7401", token: "ctx-secret", tokenSource: "context file token-file", context: "file", timeout: 3 * time.Second},
		{name: "env context beats current context", cfg: twoContexts, env: map[string]string{EnvContext: "other"},
			servers: "http://other-a:7401,http://other-b:7401", context: "other", timeout: DefaultTimeout, insecure: true},
		{name: "flag context beats env context", cfg: twoContexts, env: map[string]string{EnvContext: "other"}, args: []string{"--context", "file"},
			servers: "http://file:7401", token: "ctx-secret", tokenSource: "context file", context: "file", timeout: 3 * time.Second},
		{name: "env beats context", cfg: twoContexts, env: map[string]string{EnvServer: "http://env-a, http://env-b", EnvToken: "env-token"},
			servers: "http://env-a,http://env-b", token: "env-token", tokenSource: EnvToken, context: "file", timeout: 3 * time.Second},
		{name: "flags beat env", cfg: twoContexts, env: map[string]string{EnvServer: "http://env", EnvToken: "env-token"},
			args:    []string{"--server", "http://f1,http://f2", "-s", "http://f3", "--token-file", "$DIR/flag-token", "--timeout", "1s"},
			servers: "http://f1,http://f2,http://f3", token: "flag-secret", tokenSource: "--token-file", context: "file", timeout: time.Second},
		{name: "token flag", args: []string{"--token", "t0k"}, servers: DefaultServer, token: "t0k", tokenSource: "--token", timeout: DefaultTimeout},
		{name: "ca-file flag overrides context insecure", cfg: twoContexts, args: []string{"--context", "other", "--ca-file", "/ca.pem"},
			servers: "http://other-a:7401,http://other-b:7401", context: "other", timeout: DefaultTimeout},
		{name: "insecure flag false overrides context", cfg: twoContexts, args: []string{"--context", "other", "--insecure-skip-tls-verify=false"},
			servers: "http://other-a:7401,http://other-b:7401", context: "other", timeout: DefaultTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := resolveWith(t, tt.cfg, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(conn.Servers, ","); got != tt.servers {
				t.Errorf("servers = %q, want %q", got, tt.servers)
			}
			if conn.Token != tt.token || !strings.HasPrefix(conn.TokenSource, tt.tokenSource) {
				t.Errorf("token = %q from %q, want %q from %q...", conn.Token, conn.TokenSource, tt.token, tt.tokenSource)
			}
			if conn.ContextName != tt.context || conn.Timeout != tt.timeout || conn.Insecure != tt.insecure {
				t.Errorf("context %q timeout %s insecure %v, want %q %s %v", conn.ContextName, conn.Timeout, conn.Insecure, tt.context, tt.timeout, tt.insecure)
			}
			if tt.token != "" && strings.Contains(conn.String(), tt.token) {
				t.Errorf("String() = %q shows the token", conn.String())
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"unknown flag context", twoContexts, nil, []string{"--context", "nope"}, ExitUsage, `--context: context "nope" is not defined in`},
		{"unknown env context", twoContexts, map[string]string{EnvContext: "nope"}, nil, ExitUsage, `TALONCTL_CONTEXT: context "nope" is not defined`},
		{"context without file", "", nil, []string{"--context", "x"}, ExitUsage, "there is no config file"},
		{"bad current context", "current-context: gone\n", nil, nil, ExitFailure, `current-context: context "gone" is not defined`},
		{"token and token-file", "", nil, []string{"--token", "a", "--token-file", "b"}, ExitUsage, "--token and --token-file: give at most one"},
		{"missing token file", "", nil, []string{"--token-file", "/nonexistent/tok"}, ExitUsage, `--token-file "/nonexistent/tok"`},
		{"empty servers", "", nil, []string{"--server", ","}, ExitUsage, "--server"},
		{"zero timeout", "", nil, []string{"--timeout", "0s"}, ExitUsage, "--timeout 0s: must be positive"},
		{"ca and insecure", "", nil, []string{"--ca-file", "x", "--insecure-skip-tls-verify"}, ExitUsage, "give at most one"},
		{"broken file", "contexts: [\n", nil, nil, ExitFailure, "config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveWith(t, tt.cfg, tt.env, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			if got := ExitCode(err); got != tt.code {
				t.Errorf("exit code = %d, want %d", got, tt.code)
			}
		})
	}
}

func TestEmptyTokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(p, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := resolveWith(t, "", nil, "--token-file", p)
	if err == nil || !strings.Contains(err.Error(), "the file is empty") {
		t.Fatalf("error = %v", err)
	}
}

func TestTLSConfig(t *testing.T) {
	if cfg, err := (&Connection{}).TLSConfig(); cfg != nil || err != nil {
		t.Fatalf("plain = %v, %v", cfg, err)
	}
	if cfg, err := (&Connection{Insecure: true}).TLSConfig(); err != nil || !cfg.InsecureSkipVerify {
		t.Fatalf("insecure = %v, %v", cfg, err)
	}
	bad := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Connection{CAFile: bad}).TLSConfig(); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("bad CA error = %v", err)
	}
	if _, _, err := (&Connection{CAFile: bad, Servers: []string{"x"}}).NewClient(0); ExitCode(err) != ExitUsage {
		t.Fatalf("NewClient with a bad CA: %v (exit %d)", err, ExitCode(err))
	}
}

func TestNewClientRejectsBadServer(t *testing.T) {
	_, _, err := (&Connection{Servers: []string{"ftp://x"}}).NewClient(0)
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "ftp://x") {
		t.Fatalf("error = %v (exit %d)", err, ExitCode(err))
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{UsageErrorf("bad"), ExitUsage},
		{fmt.Errorf("wrapped: %w", &ExitError{Code: 7, Err: errors.New("x")}), 7},
		{fmt.Errorf("%w: dial", apiv1.ErrUnavailable), ExitUnavailable},
		{&apiv1.APIError{HTTPStatus: http.StatusServiceUnavailable}, ExitUnavailable},
		{&apiv1.APIError{HTTPStatus: http.StatusUnauthorized}, ExitAuthRejected},
		{&apiv1.APIError{HTTPStatus: http.StatusForbidden}, ExitAuthRejected},
		{&apiv1.APIError{HTTPStatus: http.StatusBadRequest}, ExitUsage},
		{&apiv1.APIError{HTTPStatus: http.StatusNotFound}, ExitFailure},
		{&apiv1.APIError{HTTPStatus: http.StatusInternalServerError}, ExitFailure},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Fatalf("ExitCode = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestFlagValueError(t *testing.T) {
	err := CheckEnum("role", "boss", []string{"coordinator", "worker"})
	if ExitCode(err) != ExitUsage || err.Error() != `--role "boss": must be one of coordinator, worker` {
		t.Fatalf("error = %q (exit %d)", err, ExitCode(err))
	}
	if err := CheckEnum("role", "worker", []string{"coordinator", "worker"}); err != nil {
		t.Fatal(err)
	}
}

func TestFormatting(t *testing.T) {
	durations := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {time.Millisecond, "1ms"}, {250 * time.Millisecond, "250ms"}, {time.Second, "1s"},
		{1550 * time.Millisecond, "1.5s"}, {42 * time.Second, "42s"}, {3*time.Minute + 12*time.Second, "3m12s"},
		{5*time.Hour + 7*time.Minute, "5h7m"}, {76 * time.Hour, "3d4h"},
	}
	for _, tt := range durations {
		if got := Duration(tt.d); got != tt.want {
			t.Errorf("Duration(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
	ts := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	if got := Timestamp(ts.UnixMilli()); got != "2026-11-01T10:00:00Z" {
		t.Errorf("Timestamp = %q", got)
	}
	if got := Timestamp(ts.UnixMilli() + 5); got != "2026-11-01T10:00:00.005Z" {
		t.Errorf("Timestamp with ms = %q", got)
	}
	if got := Timestamp(0); got != "-" {
		t.Errorf("Timestamp(0) = %q", got)
	}
}

func TestTableAlignsColouredCells(t *testing.T) {
	s := IOStreams{StdoutTTY: true, ColorProfile: colorprofile.ANSI}
	cs := s.ColorScheme()
	tab := NewTable("NAME", "HEALTH", "X")
	tab.AddRow("a", cs.Health("healthy"), "1")
	tab.AddRow("bbbbbb", cs.Health("unhealthy"), "2")
	var b bytes.Buffer
	if err := tab.Render(&b, false); err != nil {
		t.Fatal(err)
	}
	want := "NAME     HEALTH      X\n" +
		"a        \x1b[32mhealthy\x1b[m     1\n" +
		"bbbbbb   \x1b[31munhealthy\x1b[m   2\n"
	if b.String() != want {
		t.Fatalf("table =\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	if err := tab.Render(&b, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "NAME") {
		t.Errorf("noHeaders printed the header:\n%s", b.String())
	}
}

func TestColorEnabled(t *testing.T) {
	tests := []struct {
		name string
		s    IOStreams
		want bool
	}{
		{"tty", IOStreams{StdoutTTY: true, ColorProfile: colorprofile.ANSI256}, true},
		{"piped", IOStreams{StdoutTTY: false, ColorProfile: colorprofile.ANSI256}, false},
		{"NO_COLOR", IOStreams{StdoutTTY: true, NoColor: true, ColorProfile: colorprofile.ANSI256}, false},
		{"no colours", IOStreams{StdoutTTY: true, ColorProfile: colorprofile.Ascii}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.ColorEnabled(); got != tt.want {
				t.Fatalf("ColorEnabled = %v, want %v", got, tt.want)
			}
			cs := tt.s.ColorScheme()
			if got := cs.Red("x") != "x"; got != tt.want {
				t.Fatalf("Red coloured = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGetenvLastWins(t *testing.T) {
	f := &Factory{Environ: []string{"A=1", "B=x=y", "A=2"}}
	if f.Getenv("A") != "2" || f.Getenv("B") != "x=y" || f.Getenv("C") != "" {
		t.Fatalf("Getenv: A=%q B=%q C=%q", f.Getenv("A"), f.Getenv("B"), f.Getenv("C"))
	}
}

// TestHintWrongAddress checks the hints for answers that only a wrong
// address gives; the real servers' answers are in the cli package's
// TestMessages goldens.
func TestHintWrongAddress(t *testing.T) {
	notReady := &apiv1.APIError{Server: "http://c:7401", HTTPStatus: http.StatusServiceUnavailable, Code: apiv1.CodeNotReady,
		Message: "no current cluster snapshot: the shared store could not be read in time (failing closed); retry, or add allowStale=true for the last good snapshot marked stale"}
	tests := []struct {
		name       string
		err        error
		allowStale bool
		want       string
	}{
		{"data address", &apiv1.APIError{Server: "http://w:7500", HTTPStatus: http.StatusNotFound, Code: "unknown_path",
			Message: `no resource at "/api/v1/nodes": objects are under /v1/objects/`}, false, "http://w:7500 is a worker's data address; talonctl talks to a coordinator's admin address"},
		{"worker admin address", &apiv1.APIError{Server: "http://w:7501", HTTPStatus: http.StatusNotFound, Code: apiv1.CodeNotFound,
			Message: `no resource at "/api/v1/nodes" on this worker`}, false, "http://w:7501 is a worker's admin address, which serves only its own /api/v1/status"},
		{"node not found", &apiv1.APIError{Server: "http://c:7401", HTTPStatus: http.StatusNotFound, Code: apiv1.CodeNotFound,
			Message: `node "w-9" is not in cluster "test"`}, false, ""},
		{"503 without --allow-stale", notReady, false, "rerun with --allow-stale"},
		{"503 with --allow-stale", notReady, true, "--allow-stale was given, but this coordinator has no last good snapshot either"},
		{"tls to plain", fmt.Errorf("%w: x: tls: first record does not look like a TLS handshake", apiv1.ErrUnavailable), false, "use an http:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Hint(tt.err, tt.allowStale)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Hint = %q, want it to contain %q", got, tt.want)
			}
		})
	}
	if m := Message(notReady); strings.Contains(m, "allowStale") || !strings.HasSuffix(m, "(failing closed)") {
		t.Errorf("Message = %q, want the API's parameter advice left out", m)
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"list", "list", 0},
		{"lst", "list", 1}, {"sever", "server", 1}, {"gte", "get", 2}, {"kitten", "sitting", 3},
	}
	for _, tt := range tests {
		if got := Levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
