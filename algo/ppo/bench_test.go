package ppo

import (
	"testing"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
)

// BenchmarkPPOMinibatch measures one CleanRL-sized minibatch step (128 rows,
// 64-64 tanh actor and critic): loss and gradient, clip, Adam. It must not
// allocate in steady state.
func BenchmarkPPOMinibatch(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		name := "sequential"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Parallel = parallel
			agent, err := onpolicy.NewAgent(env.UniformBox(-1, 1, 4), env.Discrete{N: 2}, cfg.agentConfig(), rng.New(1, "bench/init", 0))
			if err != nil {
				b.Fatal(err)
			}
			defer agent.Close()
			const B = 128
			agent.Reserve(B)
			ro := onpolicy.NewRollout(B, 1, 4, 1)
			r := rng.New(1, "bench/data", 0)
			for k := range ro.Obs {
				ro.Obs[k] = float32(r.NormFloat64())
			}
			for k := range ro.Actions {
				ro.Actions[k] = float32(r.IntN(2))
				ro.Adv[k] = float32(r.NormFloat64())
				ro.Returns[k] = float32(r.NormFloat64())
				ro.LogProbs[k] = -0.7
			}
			inds := make([]int, B)
			for i := range inds {
				inds[i] = i
			}
			mb := newMinibatch(B, 4, 1)
			opt, _ := nn.NewAdam(nn.AdamConfig{LR: 2.5e-4, Eps: 1e-5})
			loss := newLosses(&cfg, mb)
			b.ReportAllocs()
			for b.Loop() {
				mb.gather(ro, inds)
				update(agent, loss, mb)
				nn.ClipGradNorm(agent.Params(), 0.5)
				opt.Step(agent.Params())
			}
		})
	}
}

// BenchmarkPPOCollect measures a 4-env × 128-step CartPole rollout (actor
// and critic forward at batch 4, sampling, env steps); no allocation.
func BenchmarkPPOCollect(b *testing.B) {
	cfg := DefaultConfig()
	envs, err := env.MakeVector("CartPole-v1", 4, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		b.Fatal(err)
	}
	defer envs.Close()
	agent, err := onpolicy.NewAgent(envs.ObservationSpace(), envs.ActionSpace(), cfg.agentConfig(), rng.New(1, "bench/init", 0))
	if err != nil {
		b.Fatal(err)
	}
	defer agent.Close()
	ro := onpolicy.NewRollout(128, 4, agent.ObsDim, agent.ActDim)
	if err := ro.Reset(envs, 1); err != nil {
		b.Fatal(err)
	}
	r := rng.New(1, "bench/act", 0)
	var step int64
	log := algo.Discard()
	b.ReportAllocs()
	for b.Loop() {
		if err := ro.Collect(envs, agent, r, log, &step, 0.99); err != nil {
			b.Fatal(err)
		}
	}
}
