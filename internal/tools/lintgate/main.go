// Command lintgate is the size gate of `make lint` (issue 39): it fails
// when a production function's cyclomatic complexity (gocyclo's count) is
// over MaxComplexity, when a function over NewComplexity is not in the
// baseline or grew past its entry there, when a production file is
// longer than MaxLines, and when a production type has more than
// MaxMethods methods (issue 50: a type with dozens of methods is carved by
// concern, STYLE.md rule 12). Production files are the module's .go files but
// tests, testdata, test support (testSupport) and generated code.
//
//	go run ./internal/tools/lintgate [-baseline FILE] [-write-baseline] [DIR]
//
// The baseline lists the functions over NewComplexity that were there when
// the gate came in, one "complexity package function" per line; it may
// only shrink: an entry whose function is gone or now at most
// NewComplexity is reported as stale, so the file is kept exact.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fzipp/gocyclo"
)

// Limits of the gate.
const (
	MaxComplexity = 20
	NewComplexity = 15
	MaxLines      = 600
	// MaxMethods bounds the methods declared on one type (value and
	// pointer receivers, generated files included).
	MaxMethods = 40
)

func main() {
	baseline := flag.String("baseline", "internal/tools/lintgate/baseline.txt", "functions over the new-code limit allowed to stay, with their complexity")
	write := flag.Bool("write-baseline", false, "write the baseline from the code instead of checking (only for functions at most the hard limit)")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	problems, err := run(root, *baseline, *write, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lintgate:", err)
		os.Exit(2)
	}
	if problems > 0 {
		fmt.Fprintf(os.Stderr, "lintgate: %d problems: split the function or file (see STYLE.md), or remove stale baseline entries\n", problems)
		os.Exit(1)
	}
}

// run checks the production files under root and prints each problem to
// out; it returns how many it found.
func run(root, baselinePath string, write bool, out io.Writer) (int, error) {
	files, err := productionFiles(root)
	if err != nil {
		return 0, err
	}
	stats, long, err := measure(files, root)
	if err != nil {
		return 0, err
	}
	if write {
		return 0, writeBaseline(baselinePath, stats)
	}
	base, err := readBaseline(baselinePath)
	if err != nil {
		return 0, err
	}
	problems := check(stats, base, out)
	for _, l := range long {
		fmt.Fprintln(out, l)
		problems++
	}
	return problems, nil
}

// testSupport are the directories of tests and test support (servers,
// harnesses, the store contract suite): not production code.
var testSupport = map[string]bool{
	"internal/integration": true, "internal/testenv": true, "internal/testsupport": true, "internal/state/statetest": true,
}

// productionFiles lists the .go files under root that the gate checks.
func productionFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || testSupport[rel]) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// measure returns the complexity of every function in files and a line
// for each file longer than MaxLines (generated files excepted) and for
// each type with more than MaxMethods methods.
func measure(files []string, root string) (gocyclo.Stats, []string, error) {
	fset := token.NewFileSet()
	var stats gocyclo.Stats
	var long []string
	methods := map[string]int{} // "dir.Type" -> methods declared on it
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		countMethods(f, filepath.Dir(path), methods)
		if generated(src) {
			continue
		}
		stats = gocyclo.AnalyzeASTFile(f, fset, stats)
		if n := strings.Count(string(src), "\n"); n > MaxLines {
			long = append(long, fmt.Sprintf("%s: %d lines, over %d: split it by concern", path, n, MaxLines))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(methods)) {
		if n := methods[t]; n > MaxMethods {
			rel, _ := filepath.Rel(root, t)
			long = append(long, fmt.Sprintf("%s: %d methods, over %d: carve it by concern", filepath.ToSlash(rel), n, MaxMethods))
		}
	}
	return stats, long, nil
}

// countMethods adds the methods f declares to methods, by "dir.Type".
func countMethods(f *ast.File, dir string, methods map[string]int) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
			continue
		}
		t := fd.Recv.List[0].Type
		if s, ok := t.(*ast.StarExpr); ok {
			t = s.X
		}
		switch x := t.(type) {
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		}
		if id, ok := t.(*ast.Ident); ok {
			methods[dir+"."+id.Name]++
		}
	}
}

// generated reports a file with the standard "Code generated ... DO NOT
// EDIT." line.
func generated(src []byte) bool {
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			return true
		}
		if strings.HasPrefix(line, "package ") {
			return false
		}
	}
	return false
}

// key names a function in the baseline: "package function".
func key(s gocyclo.Stat) string { return s.PkgName + " " + s.FuncName }

// check compares stats with the baseline and prints each problem.
func check(stats gocyclo.Stats, base map[string]int, out io.Writer) int {
	problems := 0
	seen := map[string]bool{}
	for _, s := range stats {
		k := key(s)
		allowed, listed := base[k]
		seen[k] = true
		switch {
		case s.Complexity > MaxComplexity:
			fmt.Fprintf(out, "%s: %s has complexity %d, over %d\n", s.Pos, s.FuncName, s.Complexity, MaxComplexity)
		case s.Complexity > NewComplexity && !listed:
			fmt.Fprintf(out, "%s: %s has complexity %d, over %d for new code\n", s.Pos, s.FuncName, s.Complexity, NewComplexity)
		case s.Complexity > NewComplexity && s.Complexity > allowed:
			fmt.Fprintf(out, "%s: %s grew to complexity %d from the baseline's %d\n", s.Pos, s.FuncName, s.Complexity, allowed)
		case listed && s.Complexity <= NewComplexity:
			fmt.Fprintf(out, "baseline: %q is now at complexity %d: remove its entry\n", k, s.Complexity)
		default:
			continue
		}
		problems++
	}
	for _, k := range slices.Sorted(maps.Keys(base)) {
		if !seen[k] {
			fmt.Fprintf(out, "baseline: %q is gone: remove its entry\n", k)
			problems++
		}
	}
	return problems
}

// readBaseline reads "complexity package function" lines; blank lines
// and # comments are skipped.
func readBaseline(path string) (map[string]int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int{}, nil
	}
	if err != nil {
		return nil, err
	}
	base := map[string]int{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		n, err := strconv.Atoi(f[0])
		if len(f) != 3 || err != nil {
			return nil, fmt.Errorf("%s:%d: %q: want \"complexity package function\"", path, i+1, line)
		}
		base[f[1]+" "+f[2]] = n
	}
	return base, nil
}

// writeBaseline writes the functions over NewComplexity (and at most
// MaxComplexity: those must be split, not listed) to path.
func writeBaseline(path string, stats gocyclo.Stats) error {
	var lines []string
	for _, s := range stats {
		if s.Complexity > NewComplexity && s.Complexity <= MaxComplexity {
			lines = append(lines, fmt.Sprintf("%d %s", s.Complexity, key(s)))
		}
	}
	slices.SortFunc(lines, func(a, b string) int {
		return strings.Compare(strings.SplitN(a, " ", 2)[1], strings.SplitN(b, " ", 2)[1])
	})
	head := fmt.Sprintf("# Functions over complexity %d that were there when the gate came in (issue 39).\n# The list may only shrink: split a function and remove its line.\n", NewComplexity)
	return os.WriteFile(path, []byte(head+strings.Join(lines, "\n")+"\n"), 0o644)
}
