package nn

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAdam measures one Adam step by parameter count and reports
// ns/param: the DQN CartPole network 4-120-84-2 (10.9k parameters in six
// tensors) and a 256-256 MLP-sized single tensor. The "tiny" case feeds
// gradients small enough that the second moment decays into float32
// subnormals, the state a long run with near-zero gradients reaches.
func BenchmarkAdam(b *testing.B) {
	dqn := [][2]int{{4, 120}, {120, 1}, {120, 84}, {84, 1}, {84, 2}, {2, 1}}
	big := [][2]int{{1 << 20, 1}}
	for _, c := range []struct {
		name   string
		shapes [][2]int
		scale  float32
	}{{"dqn-10.9k", dqn, 1e-2}, {"big-1M", big, 1e-2}, {"dqn-10.9k-tiny", dqn, 1e-30}} {
		r := rand.New(rand.NewPCG(1, 2))
		var params []*Param
		n := 0
		for i, s := range c.shapes {
			k := s[0] * s[1]
			p := &Param{Name: fmt.Sprint(i), Shape: []int{s[0], s[1]}, Value: make([]float32, k), Grad: make([]float32, k)}
			for j := range p.Grad {
				p.Value[j] = float32(r.NormFloat64())
				p.Grad[j] = c.scale * float32(r.NormFloat64())
			}
			params = append(params, p)
			n += k
		}
		opt, err := NewAdam(AdamConfig{LR: 1e-4})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			opt.Step(params)
			for b.Loop() {
				opt.Step(params)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/param")
		})
	}
}
