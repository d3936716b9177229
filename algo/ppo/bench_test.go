package ppo

import (
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
	"herd/rollout"
	"herd/sample"
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
			seg := sample.NewSegment(B, 1, 4, 1)
			adv, returns := make([]float32, B), make([]float32, B)
			r := rng.New(1, "bench/data", 0)
			for k := range seg.Obs {
				seg.Obs[k] = float32(r.NormFloat64())
			}
			for k := range seg.Actions {
				seg.Actions[k] = float32(r.IntN(2))
				adv[k] = float32(r.NormFloat64())
				returns[k] = float32(r.NormFloat64())
				seg.LogProbs[k] = -0.7
			}
			inds := make([]int, B)
			for i := range inds {
				inds[i] = i
			}
			mb := newMinibatch(4, 1)
			mb.resize(B)
			opt, _ := nn.NewAdam(nn.AdamConfig{LR: 2.5e-4, Eps: 1e-5})
			loss := newLosses(&cfg, mb)
			b.ReportAllocs()
			for b.Loop() {
				mb.gather(seg, adv, returns, inds)
				update(agent, loss, mb)
				nn.ClipGradNorm(agent.Params(), 0.5)
				opt.Step(agent.Params())
			}
		})
	}
}

// BenchmarkPPOCollect measures a 4-env × 128-step CartPole rollout by the
// env worker (policy forward at batch 4, sampling, env steps); no
// allocation.
func BenchmarkPPOCollect(b *testing.B) {
	cfg := DefaultConfig()
	envs, err := env.MakeVector("CartPole-v1", 4, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		b.Fatal(err)
	}
	defer envs.Close()
	sp := algo.SpacesOf(envs)
	policy, err := onpolicy.NewPolicy(sp, cfg.agentConfig(), rng.New(1, "bench/init", 0))
	if err != nil {
		b.Fatal(err)
	}
	sampler, err := onpolicy.NewSampler(sp, rng.New(1, "bench/act", 0))
	if err != nil {
		b.Fatal(err)
	}
	w := rollout.NewSegments(0, envs, rollout.NewInline(policy, sampler), 0.99)
	if err := w.Reset(1); err != nil {
		b.Fatal(err)
	}
	seg := sample.NewSegment(128, 4, 4, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Collect(seg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint measures the checkpoints of a PPO CartPole run with
// the default settings (4 envs × 128 steps, 64-64 networks, Adam) through
// TrainRun. One op is one training run of 100 iterations (51,200 steps):
// every=512 takes a checkpoint at every iteration, every=default one at
// the end only, so the difference of their ns/op is the cost of 99
// checkpoints. ckpt-ms and ckpt-bytes are per checkpoint: the time to
// gather the state (weights, Adam moments, streams, envs, the metrics
// recorder's state and files) and to write it (encode, fsync, rename,
// drop the oldest), and its size.
func BenchmarkCheckpoint(b *testing.B) {
	learntest.BenchCheckpoint(b, Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 51200\n", "512")
}

// BenchmarkCheckpointLSTM is BenchmarkCheckpoint for PPO-LSTM on
// CartPoleNoVel (an LSTM of 64 units before the 64-64 layers), whose
// checkpoint adds each env's recurrent state; 12,800 steps, as BPTT makes
// a step several times dearer.
func BenchmarkCheckpointLSTM(b *testing.B) {
	learntest.BenchCheckpoint(b, Spec(), "algo: ppo\nenv: CartPoleNoVel-v1\nsteps: 12800\nppo: {recurrent: {type: lstm, hidden: 64}}\n", "512")
}
