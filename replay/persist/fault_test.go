package persist

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestCheckpointFailure injects I/O errors into everything under the
// checkpoint directory: the snapshot must fail with an error, the store
// must keep serving, and the next snapshot (faults off) must succeed.
func TestCheckpointFailure(t *testing.T) {
	toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.Contains(op.Path, "checkpoints") && op.Kind != errorfs.OpRemoveAll && op.Kind != errorfs.OpRemove {
			return errorfs.ErrInjected
		}
		return nil
	})}
	fs := errorfs.Wrap(vfs.NewMem(), toggle)
	url := "file://" + filepath.ToSlash(t.TempDir())
	s := openTest(t, Options{Mode: Hybrid, FS: fs, CacheMB: 1, SnapshotURL: url, SnapshotEvery: -1})
	fill(t, s, 0, 100, 20000)
	toggle.On()
	if _, err := s.Snapshot(ctx); err == nil || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("snapshot with failing checkpoint dir: %v", err)
	}
	toggle.Off()
	fill(t, s, 100, 10, 20000)
	if _, err := s.Get("k00105"); err != nil {
		t.Fatalf("store broken after failed snapshot: %v", err)
	}
	info, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot after faults cleared: %v", err)
	}
	if info.Len != 110 {
		t.Fatalf("snapshot holds %d keys, want 110", info.Len)
	}
}
