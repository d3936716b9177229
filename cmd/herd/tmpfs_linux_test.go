//go:build linux

package main

import (
	"os"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size at dir (created), or skips the test
// where mounting is not permitted (not root).
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): this full-disk case needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}
