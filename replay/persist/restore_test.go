package persist

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// readTestManifest reads snapshot id's manifest straight from a file://
// bucket directory.
func readTestManifest(t *testing.T, bucket string, id uint64) *manifest {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(bucket, filepath.FromSlash(manifestKey(id))))
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(id, body)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// flipBit flips one bit in the middle of a bucket object.
func flipBit(t *testing.T, bucket, object string) {
	t.Helper()
	p := filepath.Join(bucket, filepath.FromSlash(object))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func checkKeys(t *testing.T, s *Store, n, size int) {
	t.Helper()
	if s.Len() != n {
		t.Fatalf("store holds %d keys, want %d", s.Len(), n)
	}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%05d", i)
		v, err := s.Get(k)
		if err != nil || !bytes.Equal(v, val(k, size)) {
			t.Fatalf("key %s: %v (value intact: %v)", k, err, err == nil && bytes.Equal(v, val(k, size)))
		}
	}
}

// TestFailedRestoreLeavesNothing damages one object of a snapshot (the
// cache file, a sampler state, a checkpoint file) in a copy of its
// bucket. Restoring from the damaged copy must fail with ErrCorrupt and
// leave Dir as it was: a plain Open there then opens a new, empty store
// (it never serves part of the snapshot), and a retry from the intact
// bucket restores every key. A later failed restore into a Dir that now
// holds a store is refused and leaves that store untouched.
func TestFailedRestoreLeavesNothing(t *testing.T) {
	good := t.TempDir()
	src := openTest(t, Options{Mode: Hybrid, CacheMB: 1, SnapshotURL: fileURL(good), SnapshotEvery: -1,
		Samplers: samplers()})
	const n, size = 600, 3000 // 1.8 MB over a 1 MiB cache: records in both tiers
	fill(t, src, 0, n, size)
	info, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := readTestManifest(t, good, info.ID)
	if m.Cache == nil || len(m.Samplers) == 0 {
		t.Fatalf("snapshot lacks a cache file or sampler state: %+v", m)
	}
	// The last sampler's state: the others would be loaded before it.
	damage := map[string]string{"cache": m.Cache.Object, "sampler": m.Samplers[len(m.Samplers)-1].State.Object}
	var biggest int64 // the largest checkpoint file: a WAL or an sstable
	for _, f := range m.DB {
		if f.Size > biggest {
			damage["checkpoint"], biggest = f.Object, f.Size
		}
	}
	if len(damage) != 3 {
		t.Fatalf("snapshot has no checkpoint files: %+v", m.DB)
	}
	for what, object := range damage {
		bad := t.TempDir()
		if err := os.CopyFS(bad, os.DirFS(good)); err != nil {
			t.Fatal(err)
		}
		flipBit(t, bad, object)
		for _, mode := range []Mode{Disk, Hybrid} {
			t.Run(what+"/"+mode.String(), func(t *testing.T) {
				fs := vfs.NewMem()
				o := Options{Mode: mode, Dir: "/store", FS: fs, CacheMB: 1, Samplers: samplers(), SnapshotEvery: -1}
				restore := func(url string) (*Store, error) {
					ro := o
					ro.Samplers, ro.RestoreFrom = samplers(), url
					return Open(ctx, ro)
				}
				// The caller's samplers are shared by the failed restore
				// and the plain Open: they must not keep restored state.
				o.Samplers = samplers()
				ro := o
				ro.RestoreFrom = fileURL(bad)
				if _, err := Open(ctx, ro); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("restore of a damaged %s: %v, want ErrCorrupt", what, err)
				}
				if names, _ := fs.List("/store"); len(names) != 0 {
					t.Fatalf("failed restore left %v in Dir", names)
				}
				plain, err := Open(ctx, o)
				if err != nil {
					t.Fatalf("plain Open after a failed restore: %v", err)
				}
				if plain.Len() != 0 {
					t.Fatalf("plain Open after a failed restore serves %d keys", plain.Len())
				}
				for _, sm := range o.Samplers {
					if sm.Len() != 0 {
						t.Fatalf("sampler %s indexes %d keys of a failed restore", sm.Name(), sm.Len())
					}
				}
				if err := plain.Close(); err != nil {
					t.Fatal(err)
				}

				// Retry in a Dir where the failed restore was cut short by
				// a crash (a leftover db.restore) instead.
				fs2 := vfs.NewMem()
				o.FS = fs2
				if _, err := restore(fileURL(bad)); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("restore of a damaged %s: %v", what, err)
				}
				if err := fs2.MkdirAll("/store/db.restore/junk", 0o755); err != nil {
					t.Fatal(err)
				}
				rs, err := restore(fileURL(good))
				if err != nil {
					t.Fatalf("retry from an intact snapshot: %v", err)
				}
				checkKeys(t, rs, n, size)
				if err := rs.Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := restore(fileURL(bad)); err == nil || errors.Is(err, ErrCorrupt) {
					t.Fatalf("restore over an existing store: %v, want a refusal", err)
				}
				again, err := Open(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				checkKeys(t, again, n, size)
				if err := again.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestCorruptNewestManifestFallsBack damages the newest manifest three
// ways; a restore must use the newest intact snapshot and log which.
func TestCorruptNewestManifestFallsBack(t *testing.T) {
	dir := t.TempDir()
	src := openTest(t, Options{Mode: Memory, SnapshotURL: fileURL(dir), SnapshotEvery: -1})
	var ids []uint64
	for i := 0; i < 3; i++ {
		fill(t, src, 50*i, 50, 100)
		info, err := src.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	path := func(id uint64) string { return filepath.Join(dir, filepath.FromSlash(manifestKey(id))) }
	newest, err := os.ReadFile(path(ids[2]))
	if err != nil {
		t.Fatal(err)
	}
	restore := func() (*Store, string, error) {
		var log bytes.Buffer
		s, err := Open(ctx, Options{Mode: Memory, RestoreFrom: fileURL(dir),
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, log.String(), err
	}
	for name, body := range map[string][]byte{"truncated": newest[:len(newest)/2], "empty": {},
		"garbage": []byte("\x00\xffnot a manifest"), "other id": bytes.Replace(newest, []byte(`"id": 3`), []byte(`"id": 2`), 1)} {
		if err := os.WriteFile(path(ids[2]), body, 0o644); err != nil {
			t.Fatal(err)
		}
		s, log, err := restore()
		if err != nil {
			t.Fatalf("%s newest manifest: %v", name, err)
		}
		if s.Len() != 100 {
			t.Fatalf("%s newest manifest: restored %d keys, want snapshot 2's 100", name, s.Len())
		}
		if !strings.Contains(log, "restoring an older snapshot") || !strings.Contains(log, "snapshot=2") {
			t.Fatalf("%s newest manifest: log does not say which snapshot was used:\n%s", name, log)
		}
	}
	if err := os.WriteFile(path(ids[1]), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, _, err := restore(); err != nil || s.Len() != 50 {
		t.Fatalf("two corrupt manifests: %v, want snapshot 1", err)
	}
	if err := os.WriteFile(path(ids[0]), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restore(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("every manifest corrupt: %v, want ErrCorrupt", err)
	}
	// A later snapshot still gets a fresh id and restores.
	info, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != 4 {
		t.Fatalf("snapshot after corrupt manifests got id %d, want 4", info.ID)
	}
	if s, _, err := restore(); err != nil || s.Len() != 150 {
		t.Fatalf("restore of the new snapshot: %v", err)
	}
}

// TestSnapshotRepairsDamagedObjects damages objects a later snapshot would
// reuse (an sstable, skipped without re-hashing, by a bit flip; the cache
// file by truncation): the next snapshot must find both, upload them
// again, and restore.
func TestSnapshotRepairsDamagedObjects(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	src := openTest(t, Options{Mode: Hybrid, CacheMB: 1, SnapshotURL: fileURL(dir), SnapshotEvery: -1,
		Samplers: samplers(), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	const n, size = 600, 3000
	fill(t, src, 0, n, size)
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := src.db.Flush(); err != nil { // make an sstable
		t.Fatal(err)
	}
	info, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := readTestManifest(t, dir, info.ID)
	var sst string
	for _, f := range m.DB {
		if strings.HasSuffix(f.Path, ".sst") {
			sst = f.Object
		}
	}
	if sst == "" || m.Cache == nil {
		t.Fatalf("snapshot lacks an sstable or a cache file: %+v", m)
	}
	flipBit(t, dir, sst)
	cache := filepath.Join(dir, filepath.FromSlash(m.Cache.Object))
	if err := os.Truncate(cache, m.Cache.Size-1); err != nil {
		t.Fatal(err)
	}
	info2, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info2.Repaired != 2 {
		t.Fatalf("second snapshot repaired %d objects, want 2: %+v", info2.Repaired, info2)
	}
	if info2.SkippedBytes == 0 || info2.VerifiedBytes < info2.SkippedBytes {
		t.Fatalf("second snapshot skipped %d bytes after reading back only %d", info2.SkippedBytes, info2.VerifiedBytes)
	}
	if !strings.Contains(log.String(), "damaged object") {
		t.Fatalf("repair not logged:\n%s", log.String())
	}
	dst := openTest(t, Options{Mode: Hybrid, CacheMB: 1, RestoreFrom: fileURL(dir), Samplers: samplers()})
	checkKeys(t, dst, n, size)
	equalStores(t, src, dst, true)

	// A third snapshot finds everything intact again.
	info3, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info3.Repaired != 0 || info3.UploadedBytes >= info2.UploadedBytes {
		t.Fatalf("third snapshot: %+v after second %+v", info3, info2)
	}
}
