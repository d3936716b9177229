package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"herd/replay/persist/blobstore"
)

func samplers() []Sampler {
	return []Sampler{NewUniform("uniform"), NewPrioritized("per", "priority", 0.6),
		NewPriorityTime("recent", "time", 0.99)}
}

// fill pushes n records with a priority and a time field.
func fill(t *testing.T, s *Store, from, n, size int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("k%05d", i)
		if err := s.Push(ctx, k, Record{Value: val(k, size),
			Fields: map[string]float64{"priority": float64(1 + i%5), "time": float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// equalStores compares keys, values, fields and the sampler draws of two
// stores; the draws match only if index and random state were restored.
func equalStores(t *testing.T, a, b *Store, draws bool) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("Len %d vs %d", a.Len(), b.Len())
	}
	a.mu.Lock()
	keys := make([]string, 0, len(a.mu.live))
	for k := range a.mu.live {
		keys = append(keys, k)
	}
	a.mu.Unlock()
	for _, k := range keys {
		ra, err := a.GetRecord(k)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.GetRecord(k)
		if err != nil {
			t.Fatalf("restored store lacks %q: %v", k, err)
		}
		if !bytes.Equal(ra.Value, rb.Value) || fmt.Sprint(ra.Fields) != fmt.Sprint(rb.Fields) {
			t.Fatalf("%q differs after restore", k)
		}
	}
	if !draws {
		return
	}
	for _, name := range []string{"uniform", "per", "recent"} {
		ia, err := a.Sample(nil, 256, name)
		if err != nil {
			t.Fatal(err)
		}
		ib, err := b.Sample(nil, 256, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(ia) != 256 || len(ia) != len(ib) {
			t.Fatalf("%s: %d vs %d items", name, len(ia), len(ib))
		}
		for i := range ia {
			if ia[i].Key != ib[i].Key || !bytes.Equal(ia[i].Value, ib[i].Value) {
				t.Fatalf("%s: draw %d: %q vs %q", name, i, ia[i].Key, ib[i].Key)
			}
		}
	}
}

// TestSnapshotRestoreFile snapshots a hybrid store (records in Pebble, in
// the cache, and still pending) to a directory and restores it in each mode
// (snapshot_s3_test.go runs the same against an S3 API in the cloud build).
func TestSnapshotRestoreFile(t *testing.T) {
	testSnapshotRestore(t, "file://"+filepath.ToSlash(t.TempDir()))
}

func testSnapshotRestore(t *testing.T, url string) {
	reg := prometheus.NewRegistry()
	src := openTest(t, Options{Mode: Hybrid, CacheMB: 1, Seed: 5, SnapshotURL: url,
		Samplers: samplers(), Registerer: reg, SnapshotEvery: -1})
	fill(t, src, 0, 200, 8000)
	if err := src.Delete(ctx, "k00010"); err != nil {
		t.Fatal(err)
	}
	info1, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot 1: %+v", info1)
	if info1.Len != 199 {
		t.Fatalf("snapshot holds %d keys, want 199", info1.Len)
	}
	// A second snapshot after a few more writes re-uses the sstables.
	fill(t, src, 200, 20, 8000)
	info2, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot 2: %+v", info2)
	if info2.SkippedBytes == 0 {
		t.Errorf("second snapshot re-sent everything: %+v", info2)
	}
	// Writes after the snapshot are not in it.
	fill(t, src, 220, 5, 100)

	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			dst := openTest(t, Options{Mode: m, CacheMB: 1, Seed: 99, RestoreFrom: url, Samplers: samplers()})
			if dst.Len() != 219 {
				t.Fatalf("restored %d keys, want 219", dst.Len())
			}
			if _, err := dst.Get("k00222"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("write after snapshot restored: %v", err)
			}
			if _, err := dst.Get("k00010"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleted key restored: %v", err)
			}
			// Compare against the source as it was at snapshot 2: drop the
			// later writes from a fresh view by restoring twice.
			ref := openTest(t, Options{Mode: Hybrid, CacheMB: 1, Seed: 1, RestoreFrom: url, Samplers: samplers()})
			equalStores(t, ref, dst, true)
		})
	}
	// The restored sampler state matches the source's at the snapshot: draw
	// from the source after undoing nothing is impossible, so compare the
	// source's state right after a snapshot instead.
	info3, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again := openTest(t, Options{Mode: Hybrid, CacheMB: 1, Seed: 77, RestoreFrom: url, Samplers: samplers()})
	if again.Len() != info3.Len {
		t.Fatalf("restored %d keys, snapshot had %d", again.Len(), info3.Len)
	}
	equalStores(t, src, again, true)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	for _, n := range []string{"herd_persist_queue_depth", "herd_persist_task_seconds", "herd_persist_snapshots_total", "herd_persist_evictions_total"} {
		if !seen[n] {
			t.Errorf("metric %s not exported", n)
		}
	}
}

// failingManifest makes the manifest upload fail, as a crash between the
// last object and the manifest would.
type failingManifest struct{ blobstore.Bucket }

func (f failingManifest) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasSuffix(key, manifestName) {
		return errors.New("injected: manifest upload failed")
	}
	return f.Bucket.Put(ctx, key, r, size)
}

func TestSnapshotWithoutManifestIgnored(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.ToSlash(dir)
	src := openTest(t, Options{Mode: Memory, SnapshotURL: url, SnapshotEvery: -1})
	fill(t, src, 0, 50, 100)
	if _, err := src.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	fill(t, src, 50, 50, 100)
	src.snapMu.Lock()
	src.bucket = failingManifest{src.bucket}
	src.snapMu.Unlock()
	if _, err := src.Snapshot(ctx); err == nil {
		t.Fatal("snapshot with failed manifest reported success")
	}
	dst := openTest(t, Options{Mode: Memory, RestoreFrom: url})
	if dst.Len() != 50 {
		t.Fatalf("restored %d keys; want the 50 of the complete snapshot", dst.Len())
	}
}

func TestCorruptSnapshot(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.ToSlash(dir)
	src := openTest(t, Options{Mode: Memory, SnapshotURL: url, SnapshotEvery: -1})
	fill(t, src, 0, 20, 1000)
	info, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Flip one byte in every object: the digest check must catch it.
	objs, _ := filepath.Glob(filepath.Join(dir, "objects", "*"))
	for _, o := range objs {
		if strings.HasSuffix(o, ".attrs") {
			continue // fileblob's metadata sidecar
		}
		b, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(o, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(ctx, Options{Mode: Memory, RestoreFrom: url}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restore of corrupt objects: %v", err)
	}
	// A manifest that is not JSON.
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(info.Manifest)), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Options{Mode: Memory, RestoreFrom: url}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restore of corrupt manifest: %v", err)
	}
	// No snapshot at all.
	if _, err := Open(ctx, Options{Mode: Memory, RestoreFrom: "file://" + filepath.ToSlash(t.TempDir())}); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("restore from empty bucket: %v", err)
	}
}

func TestUnknownSnapshotScheme(t *testing.T) {
	_, err := Open(ctx, Options{Mode: Memory, SnapshotURL: "ftp://x/y"})
	if !errors.Is(err, blobstore.ErrBadURL) {
		t.Fatalf("unknown scheme: %v", err)
	}
}

// TestPeriodicSnapshot checks the timer takes snapshots on its own and that
// Close stops it.
func TestPeriodicSnapshot(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.ToSlash(dir)
	s := openTest(t, Options{Mode: Hybrid, FS: vfs.NewMem(), SnapshotURL: url, SnapshotEvery: 20 * time.Millisecond})
	fill(t, s, 0, 10, 100)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ids, err := manifestIDs(ctx, s.bucket)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timer took %d snapshots in 20 s; last error %v", len(ids), s.LastSnapshotError())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
