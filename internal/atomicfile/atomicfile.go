package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically (see Write).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write creates path atomically: fill writes the content into a temporary
// file beside path, which is then fsynced, renamed over path, and the
// directory fsynced. On any error the temporary file is removed and path is
// left as it was.
func Write(path string, perm os.FileMode, fill func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	tmp := f.Name()
	err = fill(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// Rename moves a complete file from src to dst (same file system) durably:
// src is fsynced first, then renamed, then dst's directory is fsynced.
func Rename(src, dst string) error {
	if err := SyncFile(src); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	return SyncDir(filepath.Dir(dst))
}

// SyncFile fsyncs the file at path.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("atomicfile: sync %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs a directory, making the creation, renaming and removal of
// its entries durable. File systems that cannot sync a directory (EINVAL)
// are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, errSyncUnsupported) {
		return fmt.Errorf("atomicfile: sync dir %s: %w", dir, err)
	}
	return nil
}
