package gen

import (
	"os"
	"path/filepath"
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
