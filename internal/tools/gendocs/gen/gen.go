// Package gen generates man pages and shell completions for talon and
// talonctl. The generated files are committed; a test fails when they are
// out of date.
package gen

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/cli"
)

// Roots returns fresh command trees of both binaries.
func Roots() []*cobra.Command {
	return []*cobra.Command{
		app.NewRootCmd(app.Env{Stdout: io.Discard, Stderr: io.Discard}),
		cli.NewCmdRoot(&cli.Factory{IO: cli.IOStreams{Out: io.Discard, ErrOut: io.Discard}}),
	}
}

// Write generates man pages into manDir and completions into compDir
// (either may be empty to skip it).
func Write(manDir, compDir string) error {
	for _, root := range Roots() {
		root.DisableAutoGenTag = true
		if manDir != "" {
			if err := os.MkdirAll(manDir, 0o755); err != nil {
				return err
			}
			// A fixed date keeps the generated pages reproducible. No Title:
			// cobra/doc then titles each page with its own command path
			// (TALONCTL\-NODES\-LIST), as man(7) expects.
			date := time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)
			hdr := &doc.GenManHeader{Section: "1", Source: "Talon", Manual: "Talon Manual", Date: &date}
			if err := doc.GenManTree(root, hdr, manDir); err != nil {
				return fmt.Errorf("man pages of %s: %w", root.Name(), err)
			}
		}
		if compDir != "" {
			if err := writeCompletions(root, compDir); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeCompletions(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := root.Name()
	gens := []struct {
		file string
		gen  func(io.Writer) error
	}{
		{name + ".bash", func(w io.Writer) error { return root.GenBashCompletionV2(w, true) }},
		{"_" + name, root.GenZshCompletion},
		{name + ".fish", func(w io.Writer) error { return root.GenFishCompletion(w, true) }},
		{name + ".ps1", root.GenPowerShellCompletionWithDesc},
	}
	for _, g := range gens {
		f, err := os.Create(filepath.Join(dir, g.file))
		if err != nil {
			return err
		}
		err = g.gen(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("completion %s: %w", g.file, err)
		}
	}
	return nil
}
