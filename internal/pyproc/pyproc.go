// Package pyproc starts herd_env's Python servers as real processes for
// tests: it finds a Python 3 with Debian's grpc and protobuf modules, runs
// `python3 -m herd_env.serve` (or another herd_env module) on a free
// loopback port, and stops it when the test ends.
package pyproc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Python returns a Python 3 that can import grpc and google.protobuf. When
// none exists the test is skipped with a message, except in CI (CI=true),
// where .ci/run installs python3-grpcio and python3-protobuf and a missing
// one is a failure.
func Python(t testing.TB) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import grpc, google.protobuf").Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no python3 with grpc and protobuf; .ci/run should have installed python3-grpcio and python3-protobuf")
	}
	t.Skip("skipping: no python3 with grpc and protobuf (apt-get install python3-grpcio python3-protobuf)")
	return ""
}

// Root is the repository root (where python/ lives).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Proc is a running Python server.
type Proc struct {
	Cmd  *exec.Cmd
	Port string
}

// Start runs `python3 -m MODULE ARGS... --port 0` with python/ and
// python/tests on PYTHONPATH, waits for its "serving ... on port N" line
// and kills it when the test ends. With HERD_PY_GRPC_IMPL=h2 in the
// environment, herd_env.serve gets --grpc-impl h2 (unless ARGS name one),
// so every test of the Python server runs against either implementation.
func Start(t testing.TB, module string, args ...string) *Proc {
	t.Helper()
	return StartWithPath(t, "", module, args...)
}

// StartWithPath is Start with extra (a PYTHONPATH-style list, or "") after
// python/ and python/tests on PYTHONPATH: for a package herd does not ship,
// such as Gymnasium's source tree named by GYMNASIUM_SRC.
func StartWithPath(t testing.TB, extra, module string, args ...string) *Proc {
	t.Helper()
	py := Python(t)
	root := Root()
	ctx, cancel := context.WithCancel(context.Background())
	args = append(append([]string(nil), args...), "--port", "0") // not into the caller's array
	if impl := os.Getenv("HERD_PY_GRPC_IMPL"); impl != "" && module == "herd_env.serve" && !hasFlag(args, "--grpc-impl") {
		args = append(args, "--grpc-impl", impl)
	}
	cmd := exec.CommandContext(ctx, py, append([]string{"-m", module}, args...)...)
	path := filepath.Join(root, "python") + string(os.PathListSeparator) + filepath.Join(root, "python", "tests")
	if extra != "" {
		path += string(os.PathListSeparator) + extra
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), " on port ") {
				lines <- sc.Text()
			}
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("%s exited before serving", module)
		}
		f := strings.Fields(line)
		return &Proc{Cmd: cmd, Port: f[len(f)-1]}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start within 30 s", module)
	}
	return nil
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// Addr is the server's loopback address.
func (p *Proc) Addr() string { return "127.0.0.1:" + p.Port }

// Command returns a command running python/tests/SCRIPT (or any path
// relative to the repository root's python/ directory) with Python, with
// python/ on PYTHONPATH.
func Command(t testing.TB, ctx context.Context, script string, args ...string) *exec.Cmd {
	t.Helper()
	py := Python(t)
	root := Root()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join(root, "python", script)}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "python"))
	return cmd
}
