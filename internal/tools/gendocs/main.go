// Command gendocs writes the man pages and shell completions of talon and
// talonctl from their cobra command trees: `go run ./internal/tools/gendocs
// -man man -completions completions` (make man completions).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/talonhq/talon/internal/tools/gendocs/gen"
)

func main() {
	man := flag.String("man", "", "directory for man pages")
	comp := flag.String("completions", "", "directory for shell completions")
	flag.Parse()
	if err := gen.Write(*man, *comp); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
