package worker

import (
	"testing"

	"herd/algo"
	"herd/algo/ppo"
	"herd/env"
	"herd/internal/scratch"
)

// BenchmarkCarrier is a policy worker's forward pass for one request of 8
// envs of configs/ppo-lstm-cartpolenovel.yaml's PPO-LSTM (H = 64): with the
// states carried in the rows (carry) and with the network keeping them
// (kept, the local executor's), so the difference is the carrying's cost.
func BenchmarkCarrier(b *testing.B) {
	res, err := algo.Resolve([]byte("algo: ppo\nenv: CartPoleNoVel-v1\nsteps: 1024\nruntime: {executor: dist}\n"+
		"ppo: {num_envs: 8, num_steps: 32, num_minibatches: 1, hidden: [64], activation: relu, recurrent: {type: lstm, hidden: 64}}\n"), []algo.Spec{ppo.Spec()}, algo.Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := env.Make(res.Header.Env)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	pieces, err := res.Spec.Pieces(res.Header, res.Config, algo.SpacesOf(e))
	if err != nil {
		b.Fatal(err)
	}
	const rows = 8
	p, err := pieces.NewPolicy()
	if err != nil {
		b.Fatal(err)
	}
	c := newCarrier(p)
	obs := make([]float32, rows*4)
	in := make([]float32, rows*(4+c.sd))
	var out []float32
	b.Run("carry", func(b *testing.B) {
		for b.Loop() {
			out = c.forward(out, in, rows)
		}
	})
	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			out = p.ForwardTo(scratch.Resize(out, rows*p.OutDim()), obs, rows)
		}
	})
}
