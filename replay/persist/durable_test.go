package persist

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/internal/rng"
	"herd/replay/persist/internal/durable"
)

// TestPowerLossSync simulates power loss with Pebble's crashable in-memory
// filesystem: CrashClone keeps only what was synced (plus, in some trials,
// a seeded random part of the rest). A Sync store pushes in order from
// another goroutine; the clone is taken while pushes are in flight, and
// every push acknowledged before it must be in the store reopened on the
// clone, intact. Half the trials open the store in a Dir that does not
// exist yet, so that persist.Open's own directory creation is tested.
// Six more trials check the WriteBack promise the same way: every push
// before the last Flush that returned survives.
func TestPowerLossSync(t *testing.T) {
	const trials, writeBackTrials = 20, 6
	r := rng.New(2026, "persist/test/powerloss", 0)
	lost := 0
	for trial := 0; trial < trials+writeBackTrials; trial++ {
		durability := Sync
		if trial >= trials {
			durability = WriteBack
		}
		newDir := trial%2 == 0
		mode := []Mode{Disk, Hybrid}[(trial/2)%2]
		unsynced := []int{0, 0, 50}[trial%3]
		target := int64(16 * (6 + r.IntN(94))) // a multiple of 16: WriteBack acknowledges at flushes
		fs := vfs.NewCrashableMem()
		dir := "/data/run/store"
		if !newDir {
			if err := durable.MkdirAll(fs, dir); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(ctx, Options{Mode: mode, Dir: dir, FS: fs, CacheMB: 1, Durability: durability, SnapshotEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		var acked atomic.Int64 // keys < acked are acknowledged
		reached := make(chan struct{})
		pctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; pctx.Err() == nil; i++ {
				k := crashKey(i)
				if err := s.Push(pctx, k, Record{Value: val(k, 300)}); err != nil {
					return // cancelled: not acknowledged
				}
				if durability == WriteBack {
					if i%16 != 15 {
						continue
					}
					if err := s.Flush(pctx); err != nil {
						return
					}
				}
				if acked.Store(int64(i + 1)); int64(i+1) == target {
					close(reached)
				}
			}
		}()
		<-reached
		must := acked.Load()
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced,
			RNG: rng.New(2026, "persist/test/powerloss/clone", trial)})
		stop()
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		re, err := Open(ctx, Options{Mode: mode, Dir: dir, FS: clone, CacheMB: 1, SnapshotEvery: -1})
		if err != nil {
			t.Fatalf("trial %d: reopen after power loss: %v", trial, err)
		}
		missing := 0
		for i := 0; i < int(must); i++ {
			k := crashKey(i)
			v, err := re.Get(k)
			if errors.Is(err, ErrNotFound) {
				missing++
				continue
			}
			if err != nil || !bytes.Equal(v, val(k, 300)) {
				t.Fatalf("trial %d: key %d corrupt after power loss: %v", trial, i, err)
			}
		}
		if err := re.Close(); err != nil {
			t.Fatal(err)
		}
		if missing > 0 {
			t.Errorf("trial %d (%v, durability %d, new dir %v, %d%% unsynced kept): %d of %d acknowledged writes lost",
				trial, mode, durability, newDir, unsynced, missing, must)
		}
		lost += missing
	}
	t.Logf("%d Sync and %d WriteBack trials: %d acknowledged writes lost", trials, writeBackTrials, lost)
}
