package envsvc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"herd/internal/pyproc"
)

// h2Python is a Python that can import h2 (Debian's python3-h2), which
// herd_env.serve --grpc-impl h2 needs; the test is skipped without one,
// except in CI, where .ci/run installs it.
func h2Python(t *testing.T) string {
	t.Helper()
	py := pyproc.Python(t)
	if exec.Command(py, "-c", "import h2, hpack").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 cannot import h2; .ci/run should have installed python3-h2")
		}
		t.Skip("skipping: no python3-h2 (apt-get install python3-h2)")
	}
	return py
}

// TestPythonH2Unittests runs herd_env.h2server's frame-level tests
// (python/tests/test_h2server.py: frames split over reads, CONTINUATION,
// a message over several DATA frames, a compressed flag, an unknown
// method, RST_STREAM mid-session, the peer's window, the size and
// concurrency limits, a graceful stop).
func TestPythonH2Unittests(t *testing.T) {
	py := h2Python(t)
	dir := filepath.Join(pyproc.Root(), "python")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "test_h2server")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir+string(os.PathListSeparator)+filepath.Join(dir, "tests"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 -m unittest test_h2server: %v\n%s", err, out)
	}
}

// TestPythonServerTestsOnH2 runs this package's tests of the Python gRPC
// server again with HERD_PY_GRPC_IMPL=h2 (pyproc.Start then passes
// --grpc-impl h2), so both of herd_env.serve's gRPC servers pass the same
// tests against gRPC-Go's client. Not in -short mode; skipped when this
// run already is the h2 one.
func TestPythonServerTestsOnH2(t *testing.T) {
	if os.Getenv("HERD_PY_GRPC_IMPL") != "" {
		t.Skip("HERD_PY_GRPC_IMPL is set: this run is already one implementation's")
	}
	if testing.Short() {
		t.Skip("skipping in -short mode: reruns the Python server's tests")
	}
	h2Python(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run",
		"^(TestPython|TestHTSRemote$|TestShmMatchesGRPC$|TestShmSpaces$)", "-test.count", "1")
	cmd.Env = append(os.Environ(), "HERD_PY_GRPC_IMPL=h2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python server's tests with HERD_PY_GRPC_IMPL=h2: %v\n%s", err, out)
	}
	t.Logf("with HERD_PY_GRPC_IMPL=h2: %s", lastLine(out))
}

func lastLine(b []byte) string {
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			return string(b[i+1:])
		}
	}
	return string(b)
}
