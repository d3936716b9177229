package nn

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestBenchMLPGFLOPs: a row's GFLOP/s is its matrix products' FLOPs over
// its time (4-64-64-2 at batch 8: 2·8·(4·64 + 64·64 + 64·2) forward, three
// times that with backward), and the peak is reported on assembly paths.
func TestBenchMLPGFLOPs(t *testing.T) {
	rows, err := BenchMLP(context.Background(), BenchOptions{Nets: []string{"64-64"}, Batches: []int{8},
		Ops: []string{OpForward, OpFwdBwd}, Backends: []string{"native"}, MinTime: time.Millisecond, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	fwd := 2.0 * 8 * (4*64 + 64*64 + 64*2)
	for _, r := range rows {
		want := fwd / r.NsPerOp
		if r.Op != OpForward {
			want *= 3
		}
		if math.Abs(r.GFLOPs-want) > 1e-9*want {
			t.Errorf("%s: %v GFLOP/s, want %v", r.Op, r.GFLOPs, want)
		}
		if (Kernels() != "portable") != (r.PeakGFLOPs > 0) {
			t.Errorf("%s on %s: peak %v", r.Op, Kernels(), r.PeakGFLOPs)
		}
	}
}
