package persist

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A file or directory survives power loss only once the directory that
// names it has been synced too: fsync of a file makes its bytes durable,
// not the entry that points at them. These helpers sync the parents of
// everything persist creates and later promises to find again.

// syncDir fsyncs directory dir, making the entries created in it durable.
func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("persist: sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("persist: sync dir %s: %w", dir, err)
	}
	return nil
}

// mkdirAllSynced creates dir and its missing ancestors, syncing the parent
// of each one it creates, and always dir's own parent: a directory left
// unsynced by an earlier, crashed call is made durable too.
func mkdirAllSynced(fsys vfs.FS, dir string) error {
	var missing []string
	for d := dir; ; {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("persist: create %s: %w", dir, err)
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
			return fmt.Errorf("persist: create %s: %w", missing[i], err)
		}
		if p := fsys.PathDir(missing[i]); p != missing[i] {
			if err := syncDir(fsys, p); err != nil {
				return err
			}
		}
	}
	return nil
}
