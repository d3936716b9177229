package nn

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"herd/nn/internal/kernel"
)

// TestBenchMLPGFLOPs: a row's GFLOP/s is its matrix products' FLOPs over
// its time (4-64-64-2 at batch 8: 2·8·(4·64 + 64·64 + 64·2) forward, three
// times that with backward), and the machine's peak is reported where the build and CPU have assembly
// kernels (whichever path HERD_KERNELS picks).
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
		if asm := len(kernel.Levels()) > 1; asm != (r.PeakGFLOPs > 0) {
			t.Errorf("%s (assembly in this build and CPU: %v): peak %v", r.Op, asm, r.PeakGFLOPs)
		}
	}
}

// TestBenchRecurrentGFLOPs: the lstm and gru rows run at 8 sequences
// whatever the batches asked, and count the gate products, 2·128 steps·8
// sequences·gates·128·(64 + 128) forward, three times that with backward.
func TestBenchRecurrentGFLOPs(t *testing.T) {
	rows, err := BenchMLP(context.Background(), BenchOptions{Nets: []string{"lstm", "gru"}, Batches: []int{1, 256},
		Ops: []string{OpForward, OpFwdBwdAdam}, Backends: []string{"native"}, MinTime: time.Millisecond, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (two nets, two ops, one batch): %+v", len(rows), rows)
	}
	for _, r := range rows {
		gates := map[string]float64{"lstm": 4, "gru": 3}[r.Net]
		want := 2 * 128 * 8 * gates * 128 * (64 + 128) / r.NsPerOp
		if r.Op != OpForward {
			want *= 3
		}
		if r.Batch != 8 || math.Abs(r.GFLOPs-want) > 1e-9*want {
			t.Errorf("%s %s batch %d: %v GFLOP/s, want batch 8 and %v", r.Net, r.Op, r.Batch, r.GFLOPs, want)
		}
	}
}

// TestBenchClock: the cpu clock times ops (positive times) and an unknown
// clock is a configuration error.
func TestBenchClock(t *testing.T) {
	rows, err := BenchMLP(context.Background(), BenchOptions{Nets: []string{"64-64"}, Batches: []int{32},
		Ops: []string{OpForward}, Backends: []string{"native"}, MinTime: time.Millisecond, Repeats: 2, Clock: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !(rows[0].NsPerOp > 0) {
		t.Fatalf("cpu clock rows %+v", rows)
	}
	if _, err := BenchMLP(context.Background(), BenchOptions{Nets: []string{"64-64"}, Clock: "sundial"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("clock sundial: %v, want ErrConfig", err)
	}
}
