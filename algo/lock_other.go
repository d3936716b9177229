//go:build !unix

package algo

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked")

// lockFile only opens the file where flock does not exist: two processes
// are not kept from writing one run directory on these systems.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}

func unlockFile(f *os.File) { f.Close() }
