package persist

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/internal/rng"
)

func benchStore(b *testing.B, m Mode, n, size int) (*Store, []string) {
	s := openTest(b, Options{Mode: m, CacheMB: 64})
	keys := make([]string, n)
	v := make([]byte, size)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%08d", i)
		if err := s.Push(ctx, keys[i], Record{Value: v}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	return s, keys
}

// BenchmarkPush measures a push until applied (Wait at the end), 1 kB
// values; allocations: the encoded record and its cache entry.
func BenchmarkPush(b *testing.B) {
	for _, m := range modes {
		b.Run(m.String(), func(b *testing.B) {
			s := openTest(b, Options{Mode: m, CacheMB: 16})
			v := make([]byte, 1024)
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%08d", i)
			}
			b.ReportAllocs()
			b.SetBytes(1024)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Push(ctx, keys[i&(len(keys)-1)], Record{Value: v}); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkGet reads cached keys: zero allocations in Memory and Hybrid.
func BenchmarkGet(b *testing.B) {
	for _, m := range []Mode{Memory, Hybrid} {
		b.Run(m.String(), func(b *testing.B) {
			s, keys := benchStore(b, m, 10000, 1024)
			r := rng.New(1, "persist/bench/get", 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Get(keys[r.IntN(len(keys))]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSample draws 32 records per call with reused buffers: zero
// allocations once the buffers are sized.
func BenchmarkSample(b *testing.B) {
	for _, m := range []Mode{Memory, Hybrid} {
		b.Run(m.String(), func(b *testing.B) {
			s, _ := benchStore(b, m, 10000, 1024)
			var items []Item
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if items, err = s.Sample(items, 32, "uniform"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSnapshotUnchanged re-snapshots a Hybrid store of 64 MiB
// (1 kB values) that has not changed since its last snapshot, to a
// file:// bucket on the local disk: nothing is uploaded, every reused
// object is read back and checked (size + SHA-256) before it is
// referenced. Bytes/op counts the bytes read back.
func BenchmarkSnapshotUnchanged(b *testing.B) {
	s := openTest(b, Options{Mode: Hybrid, CacheMB: 16, Dir: b.TempDir(), FS: vfs.Default,
		SnapshotURL: "file://" + filepath.ToSlash(b.TempDir()), SnapshotEvery: -1})
	v := make([]byte, 1024)
	for i := 0; i < 64<<10; i++ {
		if err := s.Push(ctx, fmt.Sprintf("k%08d", i), Record{Value: v}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Snapshot(ctx); err != nil {
		b.Fatal(err)
	}
	var info SnapshotInfo
	b.ResetTimer()
	for b.Loop() {
		var err error
		if info, err = s.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(info.VerifiedBytes)
	b.ReportMetric(float64(info.UploadedBytes), "uploaded-B/op")
}
