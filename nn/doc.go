// Package nn is herd's small, fast neural-network core: float32 MLPs with
// explicit backward passes, the policy and value heads RL algorithms need,
// losses, optimizers, initialisers, target-network updates and safetensors
// checkpoints. Every actor and learner runs on it, so its speed sets the
// ceiling for training speed.
//
// # What is here
//
//   - Param (value + accumulated gradient + checkpoint name/shape) and Tensor.
//   - MLP: Linear layers with ReLU/Tanh/Sigmoid/Identity, built from an
//     MLPConfig and initialised from a seeded *rand.Rand (PyTorch default,
//     orthogonal with gain, Xavier, Kaiming). Forward, ForwardTo, Backward,
//     Params, ZeroGrad, Clone, CopyFrom.
//   - Heads: Categorical (log-softmax, sample, log-prob, entropy), DiagGaussian
//     (state-independent or state-dependent log-std, reparameterised sample),
//     TanhGaussian (SAC, with the tanh log-det correction), TanhActor
//     (DDPG/TD3), Q helpers (GatherTo, ScatterTo, MaxTo, ArgmaxTo,
//     EpsilonGreedyTo) and Critic for Q(s, a) over concat(obs, action).
//     Each head has a Backward that turns dL/d(log π), dL/dH or dL/da into
//     dL/d(network output).
//   - Losses MSE and Huber (plain and importance-weighted) with gradients.
//   - Optimizers Adam (L2 or decoupled weight decay), SGD, RMSProp;
//     LinearSchedule for annealing; ClipGradNorm; HardUpdate, PolyakUpdate.
//   - Save/Load in the safetensors format, readable by PyTorch.
//   - Gemm, the matrix-multiply backend: DefaultGemm (AVX2/FMA assembly with
//     a portable Go fallback, never cgo), GonumGemm (the baseline), and
//     OpenBLAS through cgo with the openblas build tag.
//
// # How an algorithm uses nn
//
// A step of an actor-critic learner (PPO-style) on a minibatch:
//
//	r := rng.New(cfg.Seed, "learner/init", 0)
//	policy, _ := nn.NewMLP(nn.MLPConfig{In: obsDim, Hidden: []int{64, 64}, Out: nActions,
//		Act: nn.Tanh, Init: nn.Init{Kind: nn.InitOrthogonal, OutGain: 0.01}}, r)
//	opt, _ := nn.NewAdam(nn.AdamConfig{LR: 2.5e-4, Eps: 1e-5})
//	head := nn.Categorical{N: nActions}
//
//	// each minibatch:
//	logits := policy.Forward(mbObs, B)                 // B×nActions, workspace
//	head.LogProbTo(newLogProb, logits, mbActions)
//	head.EntropyTo(entropy, logits)
//	// ... the algorithm computes dL/dlogπ and dL/dH per row (with 1/B) ...
//	head.Backward(dLogits, logits, mbActions, dLogProb, dEntropy)
//	policy.ZeroGrad()
//	policy.Backward(dLogits)                           // grads accumulate in Params
//	nn.ClipGradNorm(policy.Params(), 0.5)
//	opt.Step(policy.Params())
//
// Continuous control (DDPG/TD3/SAC) uses Critic, whose Backward returns
// dQ/daction to push into the actor's head, and a target network kept with
// Clone + PolyakUpdate(target.Params(), online.Params(), tau). Heads with
// their own parameters (DiagGaussian's state-independent LogStd) return
// them from Params(): step and zero them together with the network's.
//
// An actor keeps its own copy of the policy and runs batched inference
// into its own buffer, without allocating:
//
//	local := policy.Clone()             // once per actor goroutine
//	local.Reserve(maxBatch)
//	...
//	_ = local.CopyFrom(published)       // when new weights arrive
//	local.ForwardTo(logits, obs, batch) // batch 1…maxBatch
//	head.SampleTo(actions, logits, actorRNG)
//
// # Conventions
//
// Buffers: dst comes first and …To functions write into dst and return it
// (gonum style). Matrices are row-major with one row per batch element.
// Forward and Backward return the network's own workspaces: valid until the
// next call, never to be modified. Backward accumulates gradients (+=), as
// PyTorch does; call ZeroGrad first. Loss functions return the mean and put
// the 1/n factor into the gradient.
//
// Errors: configuration and file problems return errors wrapping the
// package sentinels (ErrConfig, ErrCorrupt, ErrMissing, ErrShape,
// ErrUnavailable). A wrong buffer length in hot-path math is a programming
// error and panics with an error wrapping ErrShape, as slices and gonum do.
//
// # Costs
//
// Forward costs one GEMM per layer with bias and ReLU fused into the
// kernel; Backward two GEMMs per layer (dW = Xᵀ·dZ reading X transposed in
// place, dX = dZ·Wᵀ through a transposed copy of W) and a bias column sum.
// Workspaces grow to the largest batch seen and are then reused, so
// Forward, Backward and the optimizers do not allocate in steady state
// (MLP.Reserve pre-sizes them). Tanh is a vectorised rational
// approximation (relative error ≤ 6e-7), ReLU's backward a compare-and-mask,
// Adam a SIMD loop. On one core of the development machine a 64-64 MLP
// forward at batch 1 takes about 0.18 µs (3x gonum's Sgemm) and
// forward+backward+Adam at batch 256 about 0.09 ms (8x gonum); `herd bench
// nn` measures them and docs/BENCHMARKS.md records the figures.
//
// # Concurrency and determinism
//
// Nothing in nn starts goroutines. An MLP, Critic or optimizer is used by
// one goroutine at a time; actors take a Clone and refresh it with
// CopyFrom. Gemm backends are stateless and shared freely. Every reduction
// runs in a fixed order (MLP.BackwardSplit runs a layer's dW GEMM on the
// caller's Splitter beside its dX GEMM, each whole), so the same seed gives
// bit-identical weights after any number of updates, whatever GOMAXPROCS
// is. (The assembly and portable kernels round differently — FMA — so bits
// match per backend and CPU feature set, not across them.)
package nn
