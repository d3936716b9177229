package algo

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxConfigBytes bounds a config file: configs are a few KiB of YAML, and
// a bound keeps a mistaken path (a device, a huge file) from being read
// without end.
const MaxConfigBytes = 1 << 20

// ErrConfigFile marks a config path that is not a readable config file:
// not a regular file, or larger than MaxConfigBytes.
var ErrConfigFile = errors.New("algo: not a config file")

// ReadConfig reads the config file at path for Resolve. It refuses, before
// reading anything, a path that is not a regular file (a device such as
// /dev/zero, a FIFO, a directory), and a file larger than MaxConfigBytes,
// however it grows while read.
func ReadConfig(path string) ([]byte, error) {
	// Stat first: opening a FIFO blocks until a writer comes.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkConfigFile(path, fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil { // what was opened, should path have changed
		return nil, err
	}
	if err := checkConfigFile(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes (1 MiB)", ErrConfigFile, path, MaxConfigBytes)
	}
	return b, nil
}

func checkConfigFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is a %s, not a regular file", ErrConfigFile, path, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxConfigBytes {
		return fmt.Errorf("%w: %s has %d bytes, more than %d (1 MiB)", ErrConfigFile, path, fi.Size(), MaxConfigBytes)
	}
	return nil
}

// fileKind names a non-regular file's type for an error message.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	default:
		return "special file"
	}
}
