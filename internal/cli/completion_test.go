package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/testsupport"
)

// completions runs `talonctl __complete args...` and returns the
// candidates (without descriptions) and the directive line.
func completions(t *testing.T, env []string, args ...string) (cands []string, directive string, r result) {
	t.Helper()
	r = talonctl(t, run{args: append([]string{"__complete"}, args...), env: env})
	if r.code != 0 {
		t.Fatalf("__complete exit %d, stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	directive = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		c, _, _ := strings.Cut(l, "\t")
		cands = append(cands, c)
	}
	return cands, directive, r
}

// TestCompletion checks dynamic completion against a live cluster: node
// IDs for nodes get, flag values, labels and contexts.
func TestCompletion(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := []string{"TALONCTL_SERVER=" + e.url}
	const noFile = ":4" // cobra.ShellCompDirectiveNoFileComp
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"node IDs", []string{"nodes", "get", ""}, []string{"coord-a", "w-1", "w-2", "w-3", "w-4", "w-5"}},
		{"node ID prefix", []string{"nodes", "get", "w-"}, []string{"w-1", "w-2", "w-3", "w-4", "w-5"}},
		{"second argument", []string{"nodes", "get", "w-1", "w-"}, []string{"w-2", "w-3", "w-4", "w-5"}},
		// Worker commands offer workers only (a coordinator is refused).
		{"cordon offers workers", []string{"nodes", "cordon", ""}, []string{"w-1", "w-2", "w-3", "w-4", "w-5"}},
		{"drain offers workers", []string{"nodes", "drain", "w-1", ""}, []string{"w-2", "w-3", "w-4", "w-5"}},
		{"cordon -l labels", []string{"nodes", "uncordon", "-l", "zone="}, []string{"zone=a", "zone=b"}},
		{"roles", []string{"nodes", "list", "--role", ""}, []string{"coordinator", "worker"}},
		{"health states", []string{"nodes", "list", "--health", ""}, []string{"healthy", "degraded", "unhealthy", "unknown"}},
		{"output formats", []string{"nodes", "list", "-o", ""}, []string{"table", "wide", "json", "yaml", "name", "jsonpath=", "jsonpath-file=", "go-template=", "go-template-file=", "custom-columns=", "custom-columns-file="}},
		{"sort keys", []string{"nodes", "list", "--sort-by", "h"}, []string{"name", "role", "health", "ready", "age", "version", "address", "uptime", "capacity", "resident", "hit-ratio"}},
		{"labels", []string{"nodes", "list", "-l", ""}, []string{"tier=ssd", "zone=a", "zone=b"}},
		{"labels prefix", []string{"nodes", "list", "-l", "zone="}, []string{"zone=a", "zone=b"}},
		{"explain key", []string{"placement", "explain", ""}, nil},
		{"shells", []string{"completion", ""}, []string{"bash", "zsh", "fish", "powershell"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cands, directive, r := completions(t, server, tt.args...)
			if tt.name == "sort keys" {
				// Fixed completions are filtered by the shell, not by cobra.
				cands = slices.DeleteFunc(cands, func(c string) bool { return !strings.HasPrefix(c, "h") })
				tt.want = []string{"health", "hit-ratio"}
			}
			if !slices.Equal(cands, tt.want) {
				t.Errorf("candidates = %q, want %q", cands, tt.want)
			}
			if directive != noFile && tt.name != "shells" {
				t.Errorf("directive = %q, want %q (no file completion)", directive, noFile)
			}
			if strings.Contains(r.stderr, "talonctl:") {
				t.Errorf("completion wrote an error:\n%s", r.stderr)
			}
		})
	}
	t.Run("descriptions", func(t *testing.T) {
		r := talonctl(t, run{args: []string{"__complete", "nodes", "get", "w-5"}, env: server})
		if !strings.Contains(r.stdout, "w-5\tworker, unhealthy\n") {
			t.Errorf("stdout = %q, want the node described by role and health", r.stdout)
		}
	})
}

// TestCompletionServerDown offers nothing, quietly, when no server answers.
func TestCompletionServerDown(t *testing.T) {
	integration(t)
	cands, directive, r := completions(t, []string{"TALONCTL_SERVER=" + closedURL(t)}, "nodes", "get", "")
	if len(cands) != 0 || directive != ":4" {
		t.Errorf("candidates %q directive %q, want none and :4", cands, directive)
	}
	if strings.Contains(r.stderr, "talonctl:") || strings.Contains(r.stderr, "refused") {
		t.Errorf("completion was noisy:\n%s", r.stderr)
	}
}

// TestBashCompletionScript sources the committed bash completion script
// and asks it to complete `talonctl nodes get ` with the real binary.
func TestBashCompletionScript(t *testing.T) {
	integration(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	e := startEnv(t, envOptions{seed: true})
	bin := filepath.Join(t.TempDir(), "talonctl")
	build := testsupport.GoBuild("", bin, "../../cmd/talonctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script, err := filepath.Abs("../../completions/talonctl.bash")
	if err != nil {
		t.Fatal(err)
	}
	// __talonctl_get_completion_results and friends come from the script;
	// _init_completion is bash-completion's, which may be absent: stub it.
	prog := `
source "$SCRIPT"
type _get_comp_words_by_ref >/dev/null 2>&1 || _get_comp_words_by_ref() { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
COMP_WORDS=(talonctl nodes get "")
COMP_CWORD=3
COMP_LINE="talonctl nodes get "
COMP_POINT=${#COMP_LINE}
__start_talonctl talonctl "" get
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
	cmd.Env = append(os.Environ(), "SCRIPT="+script, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "TALONCTL_SERVER="+e.url)
	var stderr strings.Builder
	cmd.Stderr = &stderr // compopt complains outside a real completion; harmless
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s%s", err, out, stderr.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		got = append(got, strings.Fields(l)[0])
	}
	if want := []string{"coord-a", "w-1", "w-2", "w-3", "w-4", "w-5"}; !slices.Equal(got, want) {
		t.Errorf("bash completed %q, want %q; output:\n%s", got, want, out)
	}
}
