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
	{"contract", []string{"herd/algo", "herd/rollout/..."}},
	{"algorithms", []string{"herd/algo/..."}},
	{"transport and services", []string{"herd/transport/...", "herd/service/...", "herd/env/remote"}},
	{"executors", []string{"herd/flow/...", "herd/worker/...", "herd/run/...", "herd/tune/..."}},
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
		{goPackage{"herd/env/remote", []string{"herd/env", "herd/service", "herd/proto/herd/v1"}}, false},
		{goPackage{"herd/service/envsvc", []string{"herd/env", "herd/service"}}, false},
		{goPackage{"herd/run/distexec", []string{"herd/worker", "herd/transport"}}, false},
		{goPackage{"herd/algo/ppo", []string{"herd/algo", "herd/algo/internal/onpolicy", "herd/rollout"}}, false},
		{goPackage{"herd/flow", []string{"herd/algo", "herd/rollout", "herd/transport"}}, false},
		{goPackage{"herd/cmd/herd", []string{"herd/launch", "herd/bench", "herd/algo/all"}}, false},
		// A test double in internal/ that imports what it fakes.
		{goPackage{"herd/internal/fakealgo", []string{"herd/algo"}}, true},
		{goPackage{"herd/service", []string{"herd/service/envsvc"}}, true},
		{goPackage{"herd/env", []string{"herd/env/remote"}}, true},
		{goPackage{"herd/nn", []string{"herd/transport"}}, true},
		{goPackage{"herd/transport", []string{"herd/worker"}}, true},
		{goPackage{"herd/algo", []string{"herd/launch"}}, true},
		// The contract knows no algorithm, an algorithm no executor or transport.
		{goPackage{"herd/algo", []string{"herd/algo/ppo"}}, true},
		{goPackage{"herd/rollout", []string{"herd/algo/internal/onpolicy"}}, true},
		{goPackage{"herd/algo/a3c", []string{"herd/flow"}}, true},
		{goPackage{"herd/algo/all", []string{"herd/run"}}, true},
		{goPackage{"herd/algo/impala", []string{"herd/transport"}}, true},
		{goPackage{"herd/launch", []string{"herd/cmd/herd"}}, true},
		{goPackage{"herd/newpkg", nil}, true},
		{goPackage{"herd/algo", []string{"herd/newpkg"}}, true},
	} {
		if got := layerViolations([]goPackage{c.pkg}); (len(got) > 0) != c.upwards {
			t.Errorf("%s → %v: violations %q, want some: %v", c.pkg.ImportPath, c.pkg.Imports, got, c.upwards)
		}
	}
}

// depBans are dependencies some packages must not compile in, directly or
// through others (`go list -deps`): env's core and its envs make envs
// without the remote env client (herd/env/remote, wired in by cmd/herd
// through env.Maker); the contract, rollout and every algorithm package
// train without the executors, the transports and the Prometheus client
// (metrics/prom, which executors and commands serve); metrics' core records
// rows without Prometheus or gRPC. A package "p/..." is p and every package
// below it (`go list p/...`), but for those of except; a banned name bans
// that package and every package below it.
var depBans = []struct {
	pkgs, except, banned []string
}{
	{[]string{"herd/env/..."}, []string{"herd/env/remote"}, []string{"google.golang.org/grpc", "google.golang.org/protobuf",
		"github.com/prometheus", "herd/env/remote", "herd/service", "herd/proto", "herd/metrics"}},
	{[]string{"herd/algo/...", "herd/rollout/..."}, nil, []string{"google.golang.org/grpc", "github.com/nats-io",
		"github.com/prometheus", "herd/flow", "herd/transport", "herd/worker", "herd/run", "herd/launch",
		"herd/env/remote", "herd/service", "herd/metrics/prom"}},
	{[]string{"herd/metrics", "herd/metrics/tfevents"}, nil, []string{"google.golang.org/grpc", "github.com/nats-io",
		"github.com/prometheus", "herd/metrics/prom"}},
}

// goList runs `go list args…` in the module root and returns its words.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Fields(string(out))
}

// bannedDeps returns one line per package of deps that a ban matches.
func bannedDeps(pkg string, deps, banned []string) []string {
	var bad []string
	for _, d := range deps {
		for _, b := range banned {
			if d == b || strings.HasPrefix(d, b+"/") {
				bad = append(bad, fmt.Sprintf("%s compiles in %s (banned: %s)", pkg, d, b))
			}
		}
	}
	return bad
}

// TestDependencyBans: the packages of depBans compile in none of their
// banned packages. Repeat with `go test ./internal/lint -run
// TestDependencyBans -v` (it logs each package's non-standard count).
func TestDependencyBans(t *testing.T) {
	for _, b := range depBans {
		var pkgs []string
		for _, p := range b.pkgs {
			pkgs = append(pkgs, goList(t, p)...)
		}
		pkgs = slices.DeleteFunc(pkgs, func(p string) bool { return slices.Contains(b.except, p) })
		if len(pkgs) < len(b.pkgs) {
			t.Fatalf("go list %v found %v: not herd's module?", b.pkgs, pkgs)
		}
		for _, pkg := range pkgs {
			deps := goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
			if !slices.Contains(deps, pkg) {
				t.Fatalf("go list -deps %s does not list %s: not herd's module?", pkg, pkg)
			}
			for _, v := range bannedDeps(pkg, deps, b.banned) {
				t.Error(v)
			}
			t.Logf("%s: %d non-standard packages", pkg, len(deps))
		}
	}
}

// TestBannedDeps: the check finds a banned package and those below it,
// and passes a package that only shares a prefix of its name.
func TestBannedDeps(t *testing.T) {
	banned := []string{"google.golang.org/grpc", "herd/flow"}
	for _, c := range []struct {
		deps []string
		want int
	}{
		{[]string{"herd/nn", "herd/env"}, 0},
		{[]string{"google.golang.org/grpc"}, 1},
		{[]string{"google.golang.org/grpc/codes", "herd/flow", "herd/nn"}, 2},
		{[]string{"google.golang.org/grpcx", "herd/flowers"}, 0},
	} {
		if got := bannedDeps("p", c.deps, banned); len(got) != c.want {
			t.Errorf("deps %v: %q, want %d", c.deps, got, c.want)
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
