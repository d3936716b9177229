package algo

import (
	"path/filepath"
	"syscall"
	"testing"
)

// addSpecialFiles adds a device and a FIFO (whose open would block until
// a writer came) to the paths ReadConfig must refuse.
func addSpecialFiles(t *testing.T, dir string, cases map[string]string) {
	cases["/dev/zero"] = "character device"
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases[fifo] = "named pipe"
}
