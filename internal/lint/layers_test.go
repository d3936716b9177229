package lint

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers is herd's layer table, lowest first, written once here and
// described in docs/ARCHITECTURE.md ("Layers"): a package may import
// packages of its own layer or of lower ones, never of a higher one. A
// pattern "p/..." matches p and every package below it, a pattern "p"
// matches p alone; an exact pattern wins over a "/..." one, and a longer
// "/..." over a shorter. Every herd package must match some pattern, so a
// new top-level package has to be placed here.
var layers = []struct {
	name     string
	patterns []string
}{
	{"internal", []string{"herd/internal/...", "herd/proto/..."}},
	{"building blocks", []string{"herd/nn/...", "herd/env/...", "herd/replay/...", "herd/metrics/...",
		"herd/weights/...", "herd/sample/...", "herd/service"}},
	{"transport and services", []string{"herd/transport/...", "herd/service/..."}},
	{"algorithms and executors", []string{"herd/algo/...", "herd/rollout/...", "herd/flow/...", "herd/worker/...", "herd/run/...", "herd/tune/..."}},
	{"tools", []string{"herd/launch/...", "herd/bench/..."}},
	{"commands", []string{"herd/cmd/...", "herd/examples/...", "herd/deploy/..."}},
}

// layerOf returns the index of path's layer in layers, or -1.
func layerOf(path string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.patterns {
			if p == path {
				return i
			}
			if base, ok := strings.CutSuffix(p, "/..."); ok && (path == base || strings.HasPrefix(path, base+"/")) && len(base) > bestLen {
				best, bestLen = i, len(base)
			}
		}
	}
	return best
}

// goPackage is what the layering check reads of `go list -json`.
type goPackage struct {
	ImportPath string
	Imports    []string
}

// layerViolations returns one line per import of a higher layer and per
// herd package that no layer holds.
func layerViolations(pkgs []goPackage) []string {
	var bad []string
	herd := func(p string) bool { return p == "herd" || strings.HasPrefix(p, "herd/") }
	for _, p := range pkgs {
		from := layerOf(p.ImportPath)
		if from < 0 {
			bad = append(bad, fmt.Sprintf("%s is in no layer: add it to the table in internal/lint/layers_test.go and docs/ARCHITECTURE.md", p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			if !herd(imp) {
				continue
			}
			to := layerOf(imp)
			if to < 0 {
				bad = append(bad, fmt.Sprintf("%s imports %s, which is in no layer", p.ImportPath, imp))
			} else if to > from {
				bad = append(bad, fmt.Sprintf("%s (layer %q) imports %s (higher layer %q)", p.ImportPath, layers[from].name, imp, layers[to].name))
			}
		}
	}
	return bad
}

// listPackages runs `go list -json ./...` in the module root.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: not herd's module?", len(pkgs))
	}
	return pkgs
}

// TestLayers: no herd package imports a package of a higher layer (test
// files aside: a test may drive its package from above). Repeat with
// `go test ./internal/lint -run TestLayers -v`.
func TestLayers(t *testing.T) {
	pkgs := listPackages(t)
	for _, v := range layerViolations(pkgs) {
		t.Error(v)
	}
	count := make([]int, len(layers))
	for _, p := range pkgs {
		if i := layerOf(p.ImportPath); i >= 0 {
			count[i]++
		}
	}
	for i, l := range layers {
		t.Logf("layer %d %-25s %d packages", i, l.name, count[i])
	}
}

// TestLayerViolations: the check fails on an upward edge, on a package in
// no layer, and passes the edges herd has.
func TestLayerViolations(t *testing.T) {
	for _, c := range []struct {
		pkg     goPackage
		upwards bool
	}{
		{goPackage{"herd/algo", []string{"herd/nn", "herd/internal/rng", "fmt"}}, false},
		{goPackage{"herd/env", []string{"herd/service", "herd/proto/herd/v1"}}, false},
		{goPackage{"herd/service/envsvc", []string{"herd/env", "herd/service"}}, false},
		{goPackage{"herd/run/distexec", []string{"herd/worker", "herd/transport"}}, false},
		{goPackage{"herd/cmd/herd", []string{"herd/launch", "herd/bench", "herd/algo/all"}}, false},
		// A test double in internal/ that imports what it fakes.
		{goPackage{"herd/internal/fakealgo", []string{"herd/algo"}}, true},
		{goPackage{"herd/service", []string{"herd/service/envsvc"}}, true},
		{goPackage{"herd/nn", []string{"herd/transport"}}, true},
		{goPackage{"herd/transport", []string{"herd/worker"}}, true},
		{goPackage{"herd/algo", []string{"herd/launch"}}, true},
		{goPackage{"herd/launch", []string{"herd/cmd/herd"}}, true},
		{goPackage{"herd/newpkg", nil}, true},
		{goPackage{"herd/algo", []string{"herd/newpkg"}}, true},
	} {
		if got := layerViolations([]goPackage{c.pkg}); (len(got) > 0) != c.upwards {
			t.Errorf("%s → %v: violations %q, want some: %v", c.pkg.ImportPath, c.pkg.Imports, got, c.upwards)
		}
	}
}

// maxCmdHerdLines bounds cmd/herd's non-test Go: it parses flags, wires
// packages and maps errors to exit codes; logic belongs in packages.
const maxCmdHerdLines = 1200

// TestCmdHerdThin counts the lines of cmd/herd's non-test Go files.
func TestCmdHerdThin(t *testing.T) {
	files, err := filepath.Glob("../../cmd/herd/*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			n++
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 || n >= maxCmdHerdLines {
		t.Errorf("cmd/herd holds %d lines of non-test Go, want fewer than %d: move logic into packages", n, maxCmdHerdLines)
	}
	t.Logf("cmd/herd: %d lines of non-test Go in %d files", n, len(slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })))
}
