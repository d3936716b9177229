// Package lint runs the project's own source checks as a test, as Pebble's
// internal/lint does: rules that gofmt and go vet do not know about. Here:
// randomness only from the run seed (TestDeterminismRules); no package
// imports a higher layer, with the layer table in layers_test.go
// (TestLayers); cmd/herd stays a thin CLI (TestCmdHerdThin).
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDeterminismRules rejects randomness that is not derived from the run
// seed (never from time): package-level math/rand
// functions, which use a global generator, and seeds built from time.Now.
func TestDeterminismRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Package-level functions of math/rand and math/rand/v2 that draw from
	// the global generator. Constructors (New, NewPCG …) are fine.
	global := map[string]bool{}
	for _, f := range []string{"Int", "IntN", "Intn", "Int32", "Int32N", "Int31", "Int31n", "Int63", "Int63n",
		"Int64", "Int64N", "Uint32", "Uint32N", "Uint64", "Uint64N", "UintN", "Float32", "Float64", "Perm",
		"Shuffle", "NormFloat64", "ExpFloat64", "N", "Seed", "Read"} {
		global[f] = true
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		file, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		randNames := map[string]bool{}
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "math/rand" || p == "math/rand/v2" {
				name := "rand"
				if imp.Name != nil {
					name = imp.Name.Name
				}
				randNames[name] = true
			}
		}
		rel, _ := filepath.Rel(root, path)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if randNames[pkg.Name] && global[sel.Sel.Name] {
				t.Errorf("%s:%d: %s.%s uses the global generator; derive a *rand.Rand with internal/rng",
					rel, fset.Position(call.Pos()).Line, pkg.Name, sel.Sel.Name)
			}
			// rand.NewPCG(uint64(time.Now().UnixNano()), …) and friends.
			if randNames[pkg.Name] && strings.HasPrefix(sel.Sel.Name, "New") {
				ast.Inspect(call, func(m ast.Node) bool {
					if s, ok := m.(*ast.SelectorExpr); ok {
						if id, ok := s.X.(*ast.Ident); ok && id.Name == "time" && s.Sel.Name == "Now" {
							t.Errorf("%s:%d: random source seeded from the clock", rel, fset.Position(m.Pos()).Line)
						}
					}
					return true
				})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
