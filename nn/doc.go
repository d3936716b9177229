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
//   - Conv2d: PyTorch's nn.Conv2d (square kernels, stride, zero padding, bias)
//     on NCHW images as an im2col product on the Gemm backend, with PyTorch's
//     parameter names and layout, so a flattened output meets a Linear as
//     torch.flatten does; ConvPreset gives the convolutions of MinAtar's and
//     Nature DQN's networks, ImpalaStages the residual stages of IMPALA's
//     encoder (3×3 convolution, 3×3 max pool of stride 2, two residual
//     blocks; ResidualStage). ConvNet stacks either (ReLU after each
//     convolution, or after the last stage), flattens and adds an MLP head,
//     named as PyTorch's nn.Sequential of the same modules.
//     TestConv2dMatchesPyTorch and TestConvNetMatchesPyTorch compare outputs
//     and every gradient with tables PyTorch wrote (testdata/gen/conv_torch.py,
//     residual_torch.py); TestResidualStageGradients checks a stage against
//     finite differences.
//   - LSTM and GRU: PyTorch's one-layer nn.LSTM / nn.GRU (gate order, names
//     weight_ih_l0 …, initialisation) run over whole sequences (T steps of B
//     sequences, time-major) with per-sequence episode resets, and
//     back-propagated through the whole sequence (truncated BPTT over a
//     segment); checked against PyTorch stepped the same way
//     (testdata/gen/recurrent_torch.py).
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
//   - Gemm, the matrix-multiply backend: DefaultGemm (AVX-512F or AVX2/FMA
//     assembly with a portable Go fallback, never cgo; Kernels names the
//     path, HERD_KERNELS picks a slower one), GonumGemm (the baseline), and
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
// CategoricalRows does the head's three calls with one log-sum-exp per row
// (the same bits): rows.Eval(logits), then rows.LogProbTo, rows.EntropyTo
// and rows.Backward on the evaluated rows.
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
// Adam a SIMD loop. `herd bench nn` measures forward and
// forward+backward+Adam against gonum's Sgemm, and docs/BENCHMARKS.md ("nn")
// records the figures.
//
// # Concurrency and determinism
//
// Nothing in nn starts goroutines. An MLP, Critic or optimizer is used by
// one goroutine at a time; actors take a Clone and refresh it with
// CopyFrom. Gemm backends are stateless and shared freely. Every reduction
// runs in a fixed order (MLP.BackwardSplit runs the second layer's dW GEMM
// on the caller's Splitter beside its dX GEMM, each whole), so the same seed gives
// bit-identical weights after any number of updates, whatever GOMAXPROCS
// is. (The assembly and portable kernels round differently — FMA — so bits
// match per kernel path, not across them; the avx512 and avx2-fma paths
// give the same bits as each other.)
//
// # Design notes
//
//   - Explicit per-layer backward, not a tape. RL networks are short
//     chains (MLP → head → loss) whose shape is known when the algorithm is
//     written. An explicit `Backward(dOut) dX` per network and a `Backward` per
//     head costs no graph bookkeeping, allocates nothing, and reads like the
//     equations in the algorithm file. The price is that each new layer type
//     needs a hand-written backward, checked by the finite-difference tests in
//     `grad_test.go` against independent float64 implementations.
//   - Derivatives from outputs. Every activation's derivative is a function
//     of its output (ReLU: y > 0, Tanh: 1 − y², Sigmoid: y(1 − y)), so a layer
//     keeps one buffer (its output) for the backward pass.
//   - Weight layout `[in][out]` in memory, so forward is the plain product
//     `Y = X·W` with contiguous rows of W for the kernel. Checkpoints store
//     `[out, in]` as PyTorch's `nn.Linear` does (`Param.Transposed`), and
//     parameters are named like an `nn.Sequential` of Linear/activation
//     modules (`0.weight`, `0.bias`, `2.weight` …), so
//     `model.load_state_dict(safetensors.torch.load_file(path))` works.
//   - Backward without materialised activations transposes.
//     `dW += Xᵀ·dZ` reads X transposed in place: the micro-kernel takes A
//     through two strides, so the same kernel does A and Aᵀ. `dX = dZ·Wᵀ`
//     goes through a cached transposed copy of W (re-transposed, in 16×16
//     blocks, at each Backward, ≈ 1–3 % of the step) so the kernel always
//     streams contiguous rows. Below batch 8 the transpose would cost more
//     than the product, so dX is taken as dot products with W's rows
//     (`dotRowsTo`). Backends with native transB (gonum, OpenBLAS) get the
//     BLAS call directly. The bias gradient Σ_rows dZ runs in the same kernel
//     as a 1×batch product with a constant 1 read at stride 0.
//   - Micro-kernels (`nn/internal/kernel/kernel_amd64.s`): a 4×16 tile
//     (8 YMM accumulators, 2 B loads + 4 broadcasts + 8 FMAs per k step), a
//     masked variant for the last n % 16 columns (VMASKMOVPS, never touching
//     memory outside the slices), a 1×64 kernel for batch 1 (the 4×16 tile
//     would be latency-bound there), and a 2×8 kernel with four interleaved
//     accumulation chains for narrow outputs (n ≤ 8: a few logits, one value),
//     which otherwise form one 64-long FMA dependency chain at batch 1. Bias
//     and ReLU are fused into the kernels' load/store. With AVX-512F
//     (`kernel512_amd64.s`) a 4×32 tile (8 ZMM accumulators) and a 1×64 row
//     kernel (4 ZMM accumulators) take the place of the 4×16, masked and 1×64
//     kernels, every column tail under opmask registers (masked lanes are
//     neither read nor written); each element gets the same FMAs in the same
//     order as on AVX2, so the bits are the same (`TestAVX512SameBitsAsAVX2`).
//     Selected once at start-up by `golang.org/x/sys/cpu` (AVX-512F, then
//     AVX2 && FMA; HERD_KERNELS=avx2-fma|portable picks a slower path);
//     otherwise the portable Go loops run. Every path is tested against a
//     float64 reference through the kernel package's per-path functions. The
//     default build is pure Go (`CGO_ENABLED=0` clean).
//   - Bit-level determinism, including batch composition. Everything runs
//     on the calling goroutine (except `BackwardSplit`, which hands a whole,
//     independent GEMM of a layer to a `Splitter`); no reduction is split
//     by thread count. More
//     strongly, the summation order of each output element depends only on
//     the layer shape (k, n), never on the batch size or which rows share a
//     tile (short tiles duplicate rows instead of switching kernels; element-
//     wise tails go through the same SIMD code via a padded copy). So a row's
//     logits are bit-identical alone or inside any batch, which HTS mode needs
//     (actors batch requests from varying executors). Tests:
//     `TestDeterminism`, `TestForwardRowIndependence`, `TestRowIndependence`.
//     Bits match per kernel path (avx512 = avx2-fma ≠ portable: FMA).
//   - Tanh is a vectorised x·P(x²)/Q(x²) ([11/12] Padé approximant of
//     Lambert's continued fraction, x clamped to ±9, relative error ≤ 6e-7,
//     `TestTanh`), not float64 `math.Tanh` per element, which dominated PPO's
//     step time. Heads that need tanh of a few values still use `math.Tanh`.
//   - Errors vs panics. Configuration, checkpoint and parameter-list
//     problems return errors wrapping `ErrConfig`, `ErrCorrupt`, `ErrMissing`,
//     `ErrShape`, `ErrUnavailable`. A wrong buffer length in hot-path math is a
//     programming error and panics with an error wrapping `ErrShape` (as
//     `slices` and gonum do) rather than burdening every Forward with an error
//     return. Checkpoint loading validates everything before touching params.
//   - OpenBLAS (`-tags openblas`, cgo, libopenblas-dev) is pinned to one
//     thread: herd parallelises across actors and learners, and one thread
//     keeps reductions ordered. It is a comparison point; the native kernels
//     are faster on these RL sizes because cgo and OpenBLAS's packing cost
//     more than the work at 64-wide layers.
//
// # Departures from the first design
//
//   - A Go 1.26 `simd/archsimd` kernel at 2.5–3x gonum;
//     the hand-written assembly is well past that (5–10x gonum), so assembly,
//     not archsimd, is the default route; the archsimd backend exists only for
//     comparison.
//   - The Gemm interface is BLAS-shaped (`Sgemm(transA, transB, …)`), and the
//     native backend additionally offers an internal fused path (bias + ReLU,
//     accumulate) found by type assertion, in the style of `database/sql/driver`
//     optional interfaces.
//
// # Not done / weak
//
//   - The `simd/archsimd` backend (`nn/gemm_simd.go`, `GOEXPERIMENT=simd`)
//     is a plain port of the tile and several times slower than the
//     assembly (docs/BENCHMARKS.md, "nn"); no AVX-512 kernels (Zen 4 executes 512-bit ops as two 256-bit halves).
//   - Training at batch 1 is slower than gonum (many tiny kernel calls for dW).
//   - Only F32 tensors in safetensors (F16/BF16 files are rejected with
//     `ErrCorrupt`).
//   - Layers: Linear, Conv2d (square kernels, zero padding), the 3×3 max
//     pool and residual blocks of IMPALA's encoder, element-wise
//     activations, LSTM and GRU; no general pooling layer or layer norm.
//     The algorithms reach ConvNet through their `encoder` key
//     (algo/internal/encoder); the recurrent layers are not selectable from
//     an algorithm's config.
package nn
