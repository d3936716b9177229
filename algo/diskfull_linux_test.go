package algo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes at a new directory, or skips the
// test where mounting is not permitted (not root, or no mount namespace).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): the full-disk case needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// A disk that fills while metrics.csv is written stops the run at that
// row, with the reason, instead of training on and failing at the end.
func TestMetricsWriteFailureStopsRun(t *testing.T) {
	mnt := mountTmpfs(t, "256k")
	out := filepath.Join(mnt, "run")
	steps := int64(50_000_000)
	res := scriptRun(t, out)
	res.Header.Steps, res.Header.LogEvery = steps, 100
	sum, err := TrainRun(context.Background(), res, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "metrics could not be written") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err %v", err)
	}
	if sum.Steps >= steps/10 {
		t.Fatalf("the run went on to step %d after the disk filled", sum.Steps)
	}
}
