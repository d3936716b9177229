package nn

import (
	"fmt"
	"testing"
)

// BenchmarkMLP measures the three ops for the networks on every
// backend. Run on one core as the targets are stated:
//
//	GOMAXPROCS=1 go test -run XXX -bench MLP ./nn/
func BenchmarkMLP(b *testing.B) {
	for _, net := range []string{"64-64", "256-256"} {
		hidden, _ := ParseNet(net)
		for _, batch := range []int{1, 256} {
			for _, op := range []string{OpForward, OpFwdBwd, OpFwdBwdAdam} {
				if batch == 1 && op != OpForward {
					continue
				}
				for _, be := range GemmBackends() {
					if be == "go" && net == "256-256" {
						continue
					}
					g, _ := GemmByName(be)
					f, err := NewBenchOp(g, hidden, 4, 2, batch, op)
					if err != nil {
						b.Fatal(err)
					}
					b.Run(fmt.Sprintf("%s/b%d/%s/%s", net, batch, op, be), func(b *testing.B) {
						b.ReportAllocs()
						f()
						for b.Loop() {
							f()
						}
					})
				}
			}
		}
	}
}

// TestForwardZeroAllocs checks the actor fast path: after warm-up at the
// largest batch, Forward allocates nothing at any batch 1…1024, and a
// training step (fwd, bwd, Adam) allocates nothing either.
func TestForwardZeroAllocs(t *testing.T) {
	for _, be := range orderedBackends() { // gonum allocates inside Sgemm
		g, _ := GemmByName(be)
		for _, batch := range []int{1, 7, 64, 1024} {
			f, err := NewBenchOp(g, []int{64, 64}, 4, 2, batch, OpForward)
			if err != nil {
				t.Fatal(err)
			}
			if a := testing.AllocsPerRun(20, f); a != 0 {
				t.Errorf("%s batch %d: Forward allocates %v times", be, batch, a)
			}
		}
		f, _ := NewBenchOp(g, []int{64, 64}, 4, 2, 256, OpFwdBwdAdam)
		if a := testing.AllocsPerRun(10, f); a != 0 {
			t.Errorf("%s: fwd+bwd+Adam allocates %v times", be, a)
		}
	}
}
