package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCIRunsWhatRaceSkips: every test that skips or shrinks itself under
// -race (it reads raceEnabled or learntest.RaceEnabled, or counts
// allocations through learntest.NoAllocs or AllocsPerStep) is run by
// .ci/run's step without -race, by name and package: CI's -race run
// alone would never check it in full.
func TestCIRunsWhatRaceSkips(t *testing.T) {
	const root = "../.."
	b, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	ci := string(b)
	step := regexp.MustCompile(`(?s)go test -count=1 [^\n]*\\\n\s*-run '\^\(([^)]*)\)\$' \\\n\s*([^\n]*)`).FindStringSubmatch(ci)
	if step == nil {
		t.Fatal(".ci/run has no `go test -count=1 … -run '^(…)$' PACKAGES` step without -race")
	}
	names := map[string]bool{}
	for _, n := range strings.Split(step[1], "|") {
		names[n] = true
	}
	pkgs := map[string]bool{}
	for _, p := range strings.Fields(step[2]) {
		pkgs[p] = true
	}
	guard := regexp.MustCompile(`\b(raceEnabled|RaceEnabled|NoAllocs|AllocsPerStep)\b`)
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestCIRunsWhatRaceSkips" {
				continue
			}
			body := string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
			if !guard.MatchString(body) {
				continue
			}
			found++
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			pkg := "./" + filepath.ToSlash(rel)
			if !names[fn.Name.Name] || !pkgs[pkg] {
				t.Errorf("%s (%s) changes under -race but .ci/run's step without -race does not run it: add %s to its -run list and %s to its packages",
					fn.Name.Name, path, fn.Name.Name, pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("found no test guarded by raceEnabled: the search is broken")
	}
}
