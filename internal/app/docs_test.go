package app

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The documentation tests read the repository's README.md, docs/ and
// Makefile: they start nothing and run under -short.

// TestDocLinks checks every relative link of README.md and of the pages
// under docs/: the file it names exists and, when it names an anchor of a
// Markdown file, that file has a heading with that anchor (GitHub's rules).
// Links with a scheme (https:, mailto:) are not followed.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	pages := markdownPages(t, root)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		a := headingAnchors(readFile(t, filepath.Join(root, rel)))
		anchors[rel] = a
		return a
	}
	checked := 0
	for _, page := range pages {
		for _, l := range markdownLinks(readFile(t, filepath.Join(root, page))) {
			target, anchor, _ := strings.Cut(l.target, "#")
			rel := page
			if target != "" {
				rel = path.Join(path.Dir(page), target)
				if strings.HasPrefix(rel, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", page, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
					t.Errorf("%s:%d: link %q: no file %s", page, l.line, l.target, rel)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			if !anchorsOf(rel)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", page, l.line, l.target, rel, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links in %d pages; the link pattern no longer finds them", checked, len(pages))
	}
}

// TestDocsReachableFromReadme checks that a newcomer finds every page:
// each page directly in docs/ is linked from README.md, and every page
// below docs/ (the runbooks) can be reached from README.md by following
// links.
func TestDocsReachableFromReadme(t *testing.T) {
	root := repoRoot(t)
	linked := func(page string) []string {
		var out []string
		for _, l := range markdownLinks(readFile(t, filepath.Join(root, page))) {
			target, _, _ := strings.Cut(l.target, "#")
			if target != "" && strings.HasSuffix(target, ".md") {
				out = append(out, path.Join(path.Dir(page), target))
			}
		}
		return out
	}
	fromReadme := linked("README.md")
	reached := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		page := queue[0]
		queue = queue[1:]
		for _, next := range linked(page) {
			if !reached[next] {
				reached[next] = true
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(next))); err == nil {
					queue = append(queue, next)
				}
			}
		}
	}
	for _, page := range markdownPages(t, root) {
		if !strings.HasPrefix(page, "docs/") {
			continue
		}
		if path.Dir(page) == "docs" && !slices.Contains(fromReadme, page) {
			t.Errorf("%s is not linked from README.md", page)
		}
		if !reached[page] {
			t.Errorf("%s cannot be reached from README.md by following links", page)
		}
	}
}

// TestReadmeLength keeps the README a page a newcomer reads in minutes;
// the rest belongs in docs/.
func TestReadmeLength(t *testing.T) {
	const most = 400
	if n := strings.Count(readFile(t, filepath.Join(repoRoot(t), "README.md")), "\n"); n > most {
		t.Errorf("README.md has %d lines, at most %d: move the details to a page in docs/ and link it", n, most)
	}
}

// TestMakeHelp keeps `make help` in step with the Makefile: every target
// that is .PHONY or has a `## ` description has both, in a form the help
// rule's pattern lists, and no description names an issue number (those
// go stale; the help says what a target does), and docs/development.md's
// table names every target. When make is installed it also runs `make
// help` and looks for every target in its output.
func TestMakeHelp(t *testing.T) {
	root := repoRoot(t)
	text := readFile(t, filepath.Join(root, "Makefile"))
	phony := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\.PHONY:(.*)$`).FindAllStringSubmatch(text, -1) {
		for _, name := range strings.Fields(m[1]) {
			phony[name] = true
		}
	}
	described := map[string]string{}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_./-]+):([^=\n][^\n]*)?$`).FindAllStringSubmatch(text, -1) {
		name, rest := m[1], m[2]
		if name == ".PHONY" {
			continue
		}
		targets = append(targets, name)
		if _, help, ok := strings.Cut(rest, "## "); ok {
			described[name] = strings.TrimSpace(help)
		}
	}
	if len(targets) < 10 || len(phony) < 10 {
		t.Fatalf("found %d targets and %d .PHONY names; the patterns no longer read the Makefile", len(targets), len(phony))
	}
	listed := regexp.MustCompile(`^[a-z-]+$`) // the help rule's grep pattern
	issue := regexp.MustCompile(`(?i)\bissues?\s*#?\d+|#\d+\b`)
	for _, name := range targets {
		help, ok := described[name]
		switch {
		case !ok:
			t.Errorf("target %s has no `## ` description, so make help does not list it", name)
		case help == "":
			t.Errorf("target %s: empty description", name)
		case !listed.MatchString(name):
			t.Errorf("target %s: make help lists only names matching %s", name, listed)
		case issue.MatchString(help):
			t.Errorf("target %s: its description names an issue (%q); say what it does instead", name, issue.FindString(help))
		}
		if !phony[name] {
			t.Errorf("target %s is not in .PHONY", name)
		}
		for _, doc := range regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]+\.md\b`).FindAllString(help, -1) {
			if _, err := os.Stat(filepath.Join(root, doc)); err != nil {
				t.Errorf("target %s: its description names %s, which does not exist", name, doc)
			}
		}
	}
	for name := range phony {
		if !slices.Contains(targets, name) {
			t.Errorf(".PHONY names %s, which is no target", name)
		}
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `make ([a-z -]+)` \\|").FindAllStringSubmatch(readFile(t, filepath.Join(root, "docs", "development.md")), -1) {
		for _, name := range strings.Fields(m[1]) {
			documented[name] = true
		}
	}
	for _, name := range targets {
		if !documented[name] {
			t.Errorf("target %s is not in the table of docs/development.md", name)
		}
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Log("make not installed: make help not run")
		return
	}
	cmd := exec.Command(makeBin, "-s", "help")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	for name, help := range described {
		want := fmt.Sprintf("%s %s", name, help)
		if !strings.Contains(strings.Join(strings.Fields(string(out)), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("make help does not print %q:\n%s", want, out)
		}
	}
}

// link is one Markdown link: its target and the line it is on.
type link struct {
	target string
	line   int
}

var (
	inlineLink    = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	referenceLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	codeSpan      = regexp.MustCompile("`+[^`]*`+")
	scheme        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// markdownLinks returns the relative links of a Markdown text: inline and
// reference links outside fenced code blocks and code spans, without those
// that carry a scheme.
func markdownLinks(text string) []link {
	var out []link
	for i, l := range proseLines(text) {
		if l == "" {
			continue
		}
		l = codeSpan.ReplaceAllString(l, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			targets = append(targets, strings.Trim(m[1], "<>"))
		}
		if m := referenceLink.FindStringSubmatch(l); m != nil {
			targets = append(targets, strings.Trim(m[1], "<>"))
		}
		for _, target := range targets {
			if target == "" || scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				continue
			}
			out = append(out, link{target: target, line: i + 1})
		}
	}
	return out
}

// proseLines returns the lines of text with those inside fenced code
// blocks blanked, so that line numbers stay those of the file.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	linkText   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text, with the explicit <a id> and <a name> anchors.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			anchors[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		slug := githubSlug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// githubSlug is the anchor GitHub derives from a heading's text: the
// rendered text (no link targets, code or emphasis marks) in lower case,
// with every character but letters, digits, spaces, hyphens and
// underscores removed and spaces turned into hyphens.
func githubSlug(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownPages returns README.md and every Markdown file below docs/,
// relative to root with forward slashes.
func markdownPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		pages = append(pages, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestGithubSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"How clients and workers fail over", "how-clients-and-workers-fail-over"},
		{"Upgrades and version skew", "upgrades-and-version-skew"},
		{"The data path: cold reads, read-ahead, warm-up", "the-data-path-cold-reads-read-ahead-warm-up"},
		{"`talonctl` and `top`", "talonctl-and-top"},
		{"A [linked](x.md) heading_with_underscore", "a-linked-heading_with_underscore"},
		{"Sizing, 10,000 workers", "sizing-10000-workers"},
	} {
		if got := githubSlug(c.heading); got != c.want {
			t.Errorf("githubSlug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
	got := headingAnchors("# A\n## A\n```\n# not a heading\n```\n## A\n")
	for _, want := range []string{"a", "a-1", "a-2"} {
		if !got[want] {
			t.Errorf("headingAnchors: no %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("headingAnchors took a line of a code block for a heading")
	}
}
