package bench

import (
	"context"
	"testing"

	"herd/replay"
)

// BenchmarkMixed runs the mixed workload (2 actors, 1 learner) for one
// window per iteration; for profiling with -cpuprofile.
func BenchmarkMixed(b *testing.B) {
	for _, v := range []replay.Locking{replay.TwoLock, replay.GlobalLock} {
		buf, err := filledBuffer(1<<20, 8, v, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(v.String(), func(b *testing.B) {
			cfg := BufferConfig{Batch: 128, ActorBatch: 32, Seed: 1}
			for i := 0; i < b.N; i++ {
				ns, items, err := mixedWindow(buf, 3, cfg, i)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(ns, "ns/learner-batch")
				b.ReportMetric(items, "items/s")
			}
		})
	}
}

// TestSmoke runs every measurement path once at a tiny size.
func TestSmoke(t *testing.T) {
	rows, err := TreeRows(context.Background(), TreeConfig{Capacities: []int{1000}, Fanouts: []int{2, 8}, Batch: 16, Seconds: 0.01, Stat: Min, Seed: 1})
	if err != nil || len(rows) != 4 {
		t.Fatalf("TreeRows: %d rows, %v", len(rows), err)
	}
	br, err := BufferRows(t.Context(), BufferConfig{Capacities: []int{2048}, Fanouts: []int{8}, Variants: []replay.Locking{replay.TwoLock, replay.GlobalLock},
		Batch: 32, ActorBatch: 8, Threads: []int{1, 3}, Ops: []string{"insert", "sample", "update", "mixed"}, Seconds: 0.01, Stat: Median, Seed: 1})
	if err != nil || len(br) != 10 {
		t.Fatalf("BufferRows: %d rows, %v", len(br), err)
	}
	for _, r := range append(rows, br...) {
		if !(r.NsPerOp > 0) || !(r.ItemsPerS > 0) {
			t.Errorf("row %+v", r)
		}
	}
	s, err := Safety(t.Context(), SafetyConfig{Capacity: 5000, Filled: 4000, Draws: 100_000, Batch: 128, Fanout: 8, Seed: 1})
	if err != nil || s.Outside != 0 || s.ZeroPrio != 0 || s.Draws < 100_000 {
		t.Fatalf("Safety: %+v, %v", s, err)
	}
	// Priorities over the float32 leaves' whole range and below it.
	s, err = Safety(t.Context(), SafetyConfig{Capacity: 5000, Filled: 4000, Draws: 100_000, Batch: 128, Fanout: 16, Seed: 2, Decades: 83})
	if err != nil || s.Outside != 0 || s.ZeroPrio != 0 || s.Draws < 100_000 || s.Decades != 83 {
		t.Fatalf("Safety, 83 decades: %+v, %v", s, err)
	}
	if _, err := Plot(t.TempDir(), append(rows, br...)); err != nil {
		t.Fatal(err)
	}
}

// TestRefRows: only 1M-slot, batch-128 tree rows get a reference comparison,
// with the recorded figure and the ratio herd/reference.
func TestRefRows(t *testing.T) {
	rows := []Row{
		{Variant: "tree", Fanout: 16, Capacity: RefCapacity, Batch: RefBatch, Op: "tree_set", NsPerOp: 355},
		{Variant: "tree", Fanout: 8, Capacity: RefCapacity, Batch: RefBatch, Op: "tree_sample", NsPerOp: 9300},
		{Variant: "tree", Fanout: 16, Capacity: 1000, Batch: RefBatch, Op: "tree_set", NsPerOp: 100},
		{Variant: "tree", Fanout: 16, Capacity: RefCapacity, Batch: 32, Op: "tree_set", NsPerOp: 100},
		{Variant: "two-lock", Fanout: 8, Capacity: RefCapacity, Batch: RefBatch, Op: "sample", NsPerOp: 100},
	}
	got := RefRows(rows)
	if len(got) != 2 {
		t.Fatalf("%d reference rows, want 2: %+v", len(got), got)
	}
	if got[0].Op != "tree_set" || got[0].RefNs != 710 || got[0].Ratio != 0.5 || got[0].RefFanout != 16 {
		t.Errorf("tree_set row %+v", got[0])
	}
	if got[1].Op != "tree_sample" || got[1].RefNs != 18600 || got[1].Ratio != 0.5 || got[1].Fanout != 8 {
		t.Errorf("tree_sample row %+v", got[1])
	}
}
