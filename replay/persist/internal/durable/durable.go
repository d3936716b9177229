// Package durable holds the filesystem steps persist and its file://
// bucket need so that what they create survives power loss: a file or
// directory is durable only once the directory naming it is synced too
// (fsync of a file covers its bytes, not the entry pointing at them).
// Everything goes through a vfs.FS, so tests can crash a
// vfs.NewCrashableMem and see exactly what was synced.
package durable

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SyncDir fsyncs directory dir, making the entries created in it durable.
func SyncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and its missing ancestors, syncing the parent
// of each one it creates, and always dir's own parent: a directory left
// unsynced by an earlier, crashed call is made durable too.
func MkdirAll(fsys vfs.FS, dir string) error {
	var missing []string
	for d := dir; ; {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		missing = append(missing, d)
		p := fsys.PathDir(d)
		if p == d {
			break
		}
		d = p
	}
	if len(missing) == 0 {
		missing = []string{dir} // only its parent needs a sync
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.MkdirAll(missing[i], 0o755); err != nil {
			return fmt.Errorf("create %s: %w", missing[i], err)
		}
		if p := fsys.PathDir(missing[i]); p != missing[i] {
			if err := SyncDir(fsys, p); err != nil {
				return err
			}
		}
	}
	return nil
}
