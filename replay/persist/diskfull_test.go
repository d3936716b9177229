package persist

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// diskFull fails every write, create and sync under /store with ENOSPC
// while it is on, as a full disk does.
func diskFull() *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasPrefix(op.Path, "/store") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate,
			errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileFlush, errorfs.OpLink, errorfs.OpReuseForWrite:
			return fmt.Errorf("write %s: %w", op.Path, syscall.ENOSPC)
		}
		return nil
	})}
}

// A full disk under a Sync store: the write that hits it fails with
// ErrDiskFull (no panic), every later write is refused at once, Failed
// fires, Close returns an error; every acknowledged record survives (a
// crash clone of the disk holds them), and opening on the still-full disk
// fails fast with the reason.
func TestDiskFullSync(t *testing.T) {
	for _, mode := range []Mode{Disk, Hybrid} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			full := diskFull()
			o := Options{Mode: mode, Dir: "/store", FS: errorfs.Wrap(mem, full), Durability: Sync, CacheMB: 1}
			s, err := Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			acked := 0
			for ; acked < 50; acked++ {
				if err := s.Push(ctx, fmt.Sprintf("k%05d", acked), Record{Value: make([]byte, 1000)}); err != nil {
					t.Fatal(err)
				}
			}
			full.On()
			err = s.Push(ctx, "late", Record{Value: make([]byte, 1000)})
			if !errors.Is(err, ErrDiskFull) && !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("push on a full disk: %v, want ENOSPC", err)
			}
			t0 := time.Now()
			if err := s.Push(ctx, "later", Record{Value: make([]byte, 10)}); err == nil || time.Since(t0) > time.Second {
				t.Fatalf("second push on a full disk: %v after %v, want a refusal at once", err, time.Since(t0))
			}
			if s.Err() == nil {
				t.Fatal("the store does not report its failure")
			}
			if err := s.Close(); err == nil {
				t.Error("Close of a store whose disk filled says nothing")
			}
			clone := mem.CrashClone(vfs.CrashCloneCfg{})
			// Still full: Open fails fast and says why.
			fullAgain := diskFull()
			fullAgain.On()
			t0 = time.Now()
			if _, err := Open(ctx, Options{Mode: mode, Dir: "/store", FS: errorfs.Wrap(clone, fullAgain), Durability: Sync}); err == nil ||
				!strings.Contains(err.Error(), "no space left") {
				t.Fatalf("open on a full disk: %v", err)
			} else if d := time.Since(t0); d > 5*time.Second {
				t.Fatalf("open on a full disk took %v", d)
			}
			clone2 := mem.CrashClone(vfs.CrashCloneCfg{})
			r, err := Open(ctx, Options{Mode: mode, Dir: "/store", FS: clone2, Durability: Sync})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i := range acked {
				if _, err := r.Get(fmt.Sprintf("k%05d", i)); err != nil {
					t.Fatalf("acknowledged record %d lost: %v", i, err)
				}
			}
		})
	}
}

// With writeback, a full disk at Close loses the records not yet written,
// and Close says so instead of panicking.
func TestDiskFullWriteBackClose(t *testing.T) {
	full := diskFull()
	s, err := Open(ctx, Options{Mode: Hybrid, Dir: "/store", FS: errorfs.Wrap(vfs.NewMem(), full), Durability: WriteBack, CacheMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := s.Push(ctx, fmt.Sprintf("k%05d", i), Record{Value: make([]byte, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	full.On()
	if err := s.Flush(ctx); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush on a full disk: %v, want ENOSPC", err)
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close after a failed flush says nothing")
	}
}

// Disk mode without sync: Pebble reports the failed log write with a
// panic of its own; the store turns it into an error, refuses later writes
// and closes without waiting on Pebble's locks.
func TestDiskFullWriteBackDisk(t *testing.T) {
	full := diskFull()
	s, err := Open(ctx, Options{Mode: Disk, Dir: "/store", FS: errorfs.Wrap(vfs.NewMem(), full), Durability: WriteBack})
	if err != nil {
		t.Fatal(err)
	}
	full.On()
	err = s.Push(ctx, "a", Record{Value: make([]byte, 100)})
	if err == nil {
		err = s.Flush(ctx)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v, want ENOSPC", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err == nil {
			t.Fatal("Close after a full disk says nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs after a full disk")
	}
}
