package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedUpToDate regenerates man pages and completions and compares
// them with the committed ones: run `make man completions` after changing a
// command.
func TestGeneratedUpToDate(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := Write(filepath.Join(tmp, "man"), filepath.Join(tmp, "completions")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"man", "completions"} {
		want, _ := filepath.Glob(filepath.Join(tmp, dir, "*"))
		have, _ := filepath.Glob(filepath.Join(root, dir, "*"))
		if len(want) != len(have) {
			t.Errorf("%s/ has %d files, generation gives %d: run make man completions", dir, len(have), len(want))
		}
		for _, w := range want {
			gen, _ := os.ReadFile(w)
			committed, err := os.ReadFile(filepath.Join(root, dir, filepath.Base(w)))
			if err != nil || string(gen) != string(committed) {
				t.Errorf("%s/%s is out of date: run make man completions", dir, filepath.Base(w))
			}
		}
	}
}

// TestManHeaderNamesItsCommand checks that each page's .TH line names the
// command of that page, not the root command.
func TestManHeaderNamesItsCommand(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, ""); err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(pages) < 10 {
		t.Fatalf("%d man pages generated", len(pages))
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".1") // talonctl-nodes-list
		want := `.TH "` + strings.ToUpper(name) + `" "1"`
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: header lacks %s", filepath.Base(p), want)
		}
	}
}
