// Package algo is the contract between herd's learning algorithms
// (algo/ppo, algo/a2c, algo/dqn, algo/sac, algo/td3, algo/ddpg) and the code
// that runs them: `herd train`, `herd eval`, `herd bench learn`, tests and
// examples. It holds no algorithm itself.
//
// # The contract's types
//
//   - Header: the keys every run shares (algo, env, seed, steps, out,
//     log_every, runtime).
//   - Config: an algorithm's own typed settings, one struct with yaml tags,
//     defaults from Spec.NewConfig, checked by Validate.
//   - Spec: name, config constructor, Train, LoadPolicy and Pieces.
//     algo/all lists the Specs the CLI knows.
//   - Runtime and Logger: what Train reports to (per-episode return and
//     length, named scalars, progress in steps). metrics.Recorder is the
//     Logger that writes metrics.csv, summary.json and curve.png.
//   - Model and Policy: what Train returns, saved as model.safetensors, and
//     the deterministic policy that `herd eval` runs.
//   - Pieces (pieces.go): an algorithm cut into the parts executors place
//     on different goroutines, processes or machines — PolicyNet, Sampler,
//     SegmentLearner — built by Spec.Pieces, which package rollout's
//     loops (rollout.Segments, rollout.Transitions) compose into samples;
//     RuntimeConfig, the `runtime:` header section that chooses the
//     executor.
//   - Capabilities (capability.go): Spec.Can declares what the pieces can
//     do (a segment learner, a transition learner, a gradient/apply split,
//     …); an Executor states what it needs and which runtime keys it reads,
//     and Admit decides from the two whether the executor runs the
//     algorithm, wording the refusal from them. Matrix renders the table
//     for the CLI and docs/guide/executors.md. The contract names no
//     executor: package run lists herd's.
//
// # A config file
//
// Strict YAML (go.yaml.in/yaml/v4 with known fields): the header keys at the
// top, then one section named after the algorithm. An unknown key, at the top
// or in the section, is an ErrConfig error that names it. Flags of
// `herd train` (--algo, --env, --seed, --steps, --out, and --set key=value
// for the section) override the file.
//
//	algo: ppo
//	env: CartPole-v1
//	seed: 1
//	steps: 500000
//	ppo:
//	  num_envs: 4
//	  num_steps: 128
//	  learning_rate: 2.5e-4
//
// # The driving loop
//
// What the CLI does, and what a test or example does in small:
//
//	res, err := algo.Resolve(fileBytes, all.Specs(), overrides)
//	rec, err := metrics.NewRecorder(…res.Header, res.Spec.Scalars…)
//	rt := &algo.Runtime{Header: res.Header, Log: rec}
//	model, err := res.Spec.Train(ctx, rt, res.Config)
//	// err == nil, or errors.Is(err, context.Canceled) after Ctrl-C:
//	// either way model holds the weights so far, and is saved.
//	model.Save(filepath.Join(res.Header.Out, "model.safetensors"))
//	rec.Close() // flushes metrics.csv, writes summary.json and curve.png
//
// And what an algorithm's Train does, in CleanRL order:
//
//	func Train(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
//		cfg := c.(*Config)
//		// seeds: every stream from rng.New(rt.Header.Seed, role, slot)
//		// envs from rt.Header.Env, agent, optimizer
//		rt.Track(agent) // lets TrainRun watch the parameters for divergence
//		for globalStep < rt.Header.Steps {
//			if ctx.Err() != nil {
//				return agent, ctx.Err() // the caller saves agent
//			}
//			// … act, step envs; for each finished episode:
//			rt.Log.Episode(globalStep, ret, length)
//			// … update; then:
//			rt.Log.Scalar("losses/value_loss", vLoss)
//			rt.Log.Step(globalStep)
//		}
//		return agent, nil
//	}
//
// # The pieces, and how an executor uses them
//
// The vocabulary is docs/ARCHITECTURE.md's: an env worker owns envs and a random
// stream, a policy worker runs the batched forward pass on a weight
// version, a learner turns samples into new versions, and a parameter
// service (weights.Store in one process, weights.Version.Encode's bytes
// across processes) hands versions out. For an on-policy algorithm:
//
//	pc, _ := spec.Pieces(h, cfg, algo.SpacesOf(envs))
//	policy, _ := pc.NewPolicy()                     // version 0: the run's initial weights
//	sampler, _ := pc.NewSampler(n, rng.New(seed, "env-worker", id))
//	learner, _ := pc.NewSegmentLearner()            // defer learner.Close()
//	worker := rollout.NewSegments(id, envs, rollout.NewInline(policy, sampler), γ)
//	worker.Reset(envSeed)
//	for {
//		worker.Collect(seg)                     // T steps × n envs, truncations bootstrapped
//		stats, _ := learner.Learn(ctx, seg)     // GAE, then the algorithm's update
//		policy.SetWeights(learner.Weights())    // or: store.Publish(…); policy.SetWeights(store.Latest())
//	}
//
// That loop, on one goroutine with the algorithm's historical random
// streams (and the policy reading the learner's parameters in place
// rather than a version per iteration), is the local executor (`runtime: {executor: local}`, PPO's and
// A2C's Train), and it trains bit-identical weights to the loops it
// replaced. examples/async runs the same pieces on two goroutines with a
// weights.Store between them. A policy row depends only on its
// observation and a sampler draws in row order from its own stream, so the
// actions do not depend on how the rows were batched or who computed them.
//
// # Rules every algorithm follows
//
//  1. Randomness comes only from internal/rng, derived from Header.Seed, so
//     that the same seed gives an identical metrics.csv (wall-clock columns
//     aside). Reductions run in a fixed order.
//  2. Header.Steps counts environment steps summed over vector envs, and
//     Logger.Step gets that same global count.
//  3. Termination and truncation differ: a truncated episode bootstraps from
//     its true final observation; a terminated one does not.
//  4. Train checks ctx between iterations and returns the model trained so
//     far with ctx.Err(); it starts no goroutine that outlives it.
//  5. Scalar names are listed up front in Spec.Scalars (metrics.csv columns)
//     and follow CleanRL: "losses/…" and "charts/…".
//  6. Bad input is an error wrapping ErrConfig (Config.Validate reports every
//     problem), never a panic.
//  7. Train calls rt.Track(model) once the model exists, and the model
//     implements ParamModel (Params), so that TrainRun can stop a diverging
//     run (non-finite loss, gradient or parameter: ErrDiverged) and save
//     the last finite parameters instead of NaNs.
//
// # Costs
//
// Nothing here is on a hot path: Logger calls are a few per iteration (the
// Recorder keeps them allocation-free), Resolve runs once per run.
//
// # The contract (algo/algo.go)
//
//   - `Spec{Name, Doc, Scalars, NewConfig, Train, LoadPolicy}` describes an algorithm.
//     `Train(ctx, *Runtime, Config) (Model, error)`; `LoadPolicy(path, Header, Config)`.
//   - `Header` holds the keys every run shares (algo, env, seed, steps, out, log_every);
//     the algorithm's own `Config` is a struct with yaml tags whose `Validate(Header)`
//     reports every problem wrapping `algo.ErrConfig`.
//   - A config file is the header keys plus one section named after the algorithm.
//     `algo.Resolve` decodes it with go.yaml.in/yaml/v4 in strict mode (`WithKnownFields`):
//     an unknown key at the top or in the section is an error naming the key and its
//     line. Flags override the file; `--set key=value` overrides the section (each
//     value parsed as YAML, strictly). `NewConfig` returns the defaults filled in and
//     the file overwrites only the keys it names, so an explicit `ent_coef: 0` stays 0
//     (a "zero means default" rule would make that impossible).
//   - `Runtime.Track(model)`: Train registers its model once built, so TrainRun's
//     divergence guard can check its `Params()` at each metrics row (see
//     "Reliability" below).
//   - `Runtime{Header, Log}`: `Log.Episode(step, return, length)` per finished episode,
//     `Log.Scalar(name, v)` per update, `Log.Step(globalStep)` per iteration. Logger
//     methods return no error (the training loop stays clean); the Recorder keeps its
//     first I/O error and returns it from `Close`.
//   - `Train` returns the model *also on cancellation* (with `ctx.Err()`), so saving
//     lives in one place, `algo.TrainRun`, which saves `model.safetensors` for both a
//     finished and an interrupted (Ctrl-C) run. Algorithms never touch files.
//   - `Policy.Act(dst, obs)` uses env's flat action encoding (a Discrete action is one
//     float32 holding the index), so `herd eval` is one loop for every algorithm.
//
// Why declared scalars (`Spec.Scalars`): metrics.csv needs its columns before the
// first row, and an off-policy algorithm has no loss before learning starts. A name
// not declared is reported by `Recorder.Close` (`metrics.ErrUndeclared`) instead of
// being silently dropped.
//
// # herd train: run directories, faults and the CLI half
//
// The CLI half lives in `algo/trainrun.go` (TrainRun), `algo/rundir.go`
// (lock, staging, commit), `algo/guard.go` (divergence), `algo/checkpoint.go`
// (metadata, finite-only saves), `algo/memory.go` + `internal/sysmem` (memory
// estimate), `internal/atomicfile` (temp + fsync + rename + directory fsync) and
// `cmd/herd/main.go` (signals, exit status). Each row is checked by a test that
// runs the built binary (`cmd/herd/cli_test.go`) or by `algo/trainrun_test.go`.
//
//	| fault tried | behaviour now |
//	|---|---|
//	| Ctrl-C during `train` | stops at the next step boundary, saves checkpoint + metrics, prints "saved", exit 130, `summary.json` `"status": "interrupted"` |
//	| Ctrl-C when the checkpoint cannot be written (a disk too small for it, e.g. a 48 KiB tmpfs at `out`) | exit 1, "interrupted at step N, but not everything was saved: …"; no "saved" claim; the new files stay in `out/.staging/` |
//	| a second Ctrl-C (even while the command is blocked, e.g. opening a FIFO) | exits at once, status 1, "exiting at once, nothing more saved" |
//	| Ctrl-C during `bench nn --min-time 3s --repeats 5` (and every bench, `eval`) | stops within one call of the timed closure (an atomic flag set by `context.AfterFunc`), exit 130 |
//	| `train --env CartPole-v9 --out existing_run` (also with `--force`) | refused before anything is written; the earlier run is byte-for-byte unchanged |
//	| `--set learning_rate=.inf` / `.nan` anywhere in a config | `ErrConfig` naming the key, before anything is written |
//	| `--out` holding a run, no flag | refused: "already holds a run …; use --force … or another --out" |
//	| `--force` run that fails before training | earlier run untouched (files are staged, moved into place only at the end) |
//	| `--resume` of a run of another algorithm or executor (impala, ppo under hts, a multiagent section under hts) | "cannot resume DIR: impala (executor local) saves no training state to continue from yet …", before anything is written |
//	| `--resume` with a changed setting, seed, env or algorithm | "cannot resume: …: it was taken for ppo.learning_rate 0.00025 (this run: 0.001)", the directory unchanged |
//	| `--resume` after SIGKILL, the newest checkpoint truncated | the newest checkpoint that loads is used, the skipped one named; metrics.csv rewritten from the checkpoint (no repeated or missing rows) |
//	| two processes into one `--out` | the second is refused: "in use by another process (locked by pid N)" (flock, released by the kernel on any exit) |
//	| `dqn --set learning_rate=1e8` | stops at the first `+Inf`/`NaN` loss: "training diverged at step 139: losses/td_loss is +Inf", last finite weights saved, `"status": "diverged"`, exit 1 |
//	| NaN parameter or gradient without a NaN loss | caught at the next metrics row ("parameter w", "gradient of w") |
//	| a model that does not expose `Params()` diverges | its non-finite weights are refused (`saveCheckpoint` reads every saved tensor back), exit 1, "not everything was saved" |
//	| NaN loss in metrics.csv | written as `NaN`/`+Inf`/`-Inf`; empty cell = no value yet |
//	| `herd eval` of a CartPole-v1 model with `--env CartPole-v0` | allowed (same spaces), with a note on stderr |
//	| `herd eval` of a checkpoint from another env/algorithm (file swapped) | refused: "trained on Acrobot-v1, not CartPole-v1" |
//	| `buffer_size=1e12`, `num_envs=1e6` (PPO: ~95 GiB of minibatch workspaces) | refused before allocating: "not enough memory: the config needs about … more than the … available (MemAvailable in /proc/meminfo); buffer_size=… alone needs …" |
//	| `ppo: {hidden: [100000, 100000]}` (SAC/TD3/DDPG/DQN: `net_arch`) | refused before allocating, naming `hidden=[100000 100000]`: every network the algorithm lists (`Networker`: actor, critics, twins, targets) counts its values, gradients and optimizer moments, plus the copies extra workers and learners hold |
//	| `--config /dev/zero`, a FIFO, a directory, a file over 1 MiB | refused before reading (`ReadConfig`): "not a config file: /dev/zero is a character device, not a regular file" |
//	| `runtime.step_time: {mean: 1000h, cv: 1e300}` | `ErrConfig`: mean in (0, 1m], cv in [0, 10], tail_factor in [1, 1000] |
//	| a run that fails before it trains (`--algo dqn --env mpe/simple_spread_v3`), a refused `--resume` | the directories it created (`runs/` included) are removed again |
//	| `ppo:` section (or any top-level key) written twice | `ErrConfig`: `line 6: key "ppo" is written twice (first on line 4)` |
//	| `bench persist --keys 0 / --value-bytes 0 / --reads 0`, `bench learn --steps -1`, `bench replay --fanout 0 / --seconds -1 / --ratio NaN / --capacity 0`, `bench nn --repeats 0 / --min-time -1s`, `bench env --num-envs 0` | each an error naming the flag (no silent default); `bench replay --capacity` and `bench persist --keys × --value-bytes` also checked against available memory |
//	| random config files and `--set` values (`FuzzResolve`, 60 s) | no panic; what Resolve accepts marshals and resolves back to the same bytes, and holds no NaN/Inf |
//
// How divergence is detected without touching each algorithm: `TrainRun` gives
// Train a Logger (`guard`) that sees every `Scalar` (non-finite → cancel the run's
// context with a `*DivergedError` as cause) and, at each metrics row, checks the
// parameters and gradients of the model that Train registered with
// `Runtime.Track` (one line per algorithm; `ParamModel` = a Model with
// `Params()`), keeping a copy of the last finite ones. The algorithms already stop
// at the next step boundary on cancellation and return the model; TrainRun puts
// the kept parameters back and saves them. Cost: a comparison per scalar, one pass
// over the parameters per metrics row.
//
// Resume (`DirResume`, `Spec.Resumable`, `Checkpoints`): a resumable Train — PPO's
// and A2C's local loop (PPO-LSTM's per-env state included), the off-policy
// local loop of DQN, SAC, TD3 and DDPG, and the flow executor's plans of
// IMPALA, A3C, SyncPlan and ReplayPlan (package flow, "Checkpoints") — saves its whole state (weights, targets, optimizers, random streams,
// envs, loop counters; the replay with its priorities and sum tree) at
// iteration boundaries into DIR/checkpoints
// (internal/trainstate: checksummed, staged and renamed, the newest
// checkpoint_keep kept), TrainRun adding the metrics recorder's state and the
// configuration (ResumeConfig). A resumed run loads the newest checkpoint that
// decodes, checks it against the run before anything in the directory changes,
// and ends bit-identical to the run that never stopped.
//
// A run with a multiagent section under the local executor (run/multipolicy)
// hands each policy's Train checkpoints of its own (Checkpoints.Policy,
// PolicyCheckpoint): every policy saves at one joint env step, and the
// executor writes one checkpoint of them all with the envs' state.
//
// Limits: only those, PPO (PPO-LSTM included) and A2C under HTS, the dist
// learner of either topology and PAL with one learner resume (PAL not
// bit-identically; Executor.NotResumable names a resumable executor's
// exceptions); envs whose state cannot be saved (no env.Snapshotter) are
// left out of the local loops', HTS's, PAL's and the flow plans' checkpoints, and a resumed
// run restarts their episodes, not bit-identically
// (Checkpoints.EnvsSaveable, RestartEnvs; summary.json envs_restarted);
// the memory estimate is a lower bound of the big allocations (float32
// rows, the networks of the run's own algorithm, not those of a multi-agent
// run's other policies), not a count; on non-unix systems the run
// lock is a no-op; a run killed with SIGKILL leaves its partial files in
// `.staging/`, which the next run into the directory clears.
//
// # Each piece: policy, sampler, learner, weight versions
//
// The executors (local, HTS, PAL, distributed) run *parts* of an
// algorithm in different places. Each algorithm therefore comes in pieces, built for one run by
// `Spec.Pieces(header, config, spaces)` (`algo/pieces.go`):
//
//	| piece | interface | PPO / A2C (`algo/internal/onpolicy`) |
//	|---|---|---|
//	| policy (policy worker) | `algo.PolicyNet`: `OutDim`, `SetWeights(*weights.Version)`, `Version`, `ForwardTo(dst, obs, n)` — deterministic, no state but the weights, row i depends only on observation i | `onpolicy.Policy`: actor and critic forward; rows `[logits \| V]` or `[μ \| log σ \| V]` (the state-independent log σ repeated per row, so a sampler needs only the row) |
//	| sampler (env worker) | `algo.Sampler`: `SampleTo(*Acts, out, n, step)` with the env worker's `*rand.Rand` | `onpolicy.Sampler`: one uniform per row (Categorical inverse CDF) or d normals (Gaussian), log π, V from the last column, env actions (Discrete start added, Box clipped) |
//	| learner | `algo.SegmentLearner`: `Learn(ctx, *sample.Segment) → []Stat`, `Weights() *weights.Version` (N = Learn calls), `Close()` (stops a helper goroutine) | `ppo.learner` / `a2c.learner`, embedding `onpolicy.Learner` (agent, optimizer, `Begin`: segment checks + GAE, versions) |
//	| weights from bytes | `Pieces.DecodeWeights(b)` | `weights.Decode` against a policy built from the run config |
//
// The on-policy env-step loop is `rollout.Segments` (package rollout): it steps an
// `env.Vector`, acts with a `rollout.Policy` (here the policy and the sampler inline,
// `rollout.Inline`) per step, and fills a `sample.Segment` (T × N,
// time-major) with observations, actions, behaviour log-probs and values, rewards with the
// truncation bootstrap r + γ·V(final observation) folded in, dones, NextObs and LastValues, the
// version that acted, the worker id and the episodes that ended (`LogEpisodes` reports them at
// their global steps). It reads V(s) from the last column of the policy's rows — the one
// convention an on-policy PolicyNet must keep — or from its optional `ValuesTo`.
//
// Formats. Samples: `sample.Segment` / `sample.Transitions`, a documented flat little-endian
// layout (`sample/doc.go`: magic, format version, kind, dims, then float32 arrays in field order,
// then episodes). Chosen over protobuf because the payload is a few float32 arrays whose lengths
// follow from four header numbers: decoding is one length check and one copy per array, with
// nothing allocated beyond the output and no per-element tags; transports that need an envelope
// carry the bytes in a field of their own versioned message. Weights: `weights.Version` is an
// immutable deep copy (number + parameters) shared lock-free through `weights.Store` (atomic
// pointer; `Wait` parks) inside a process, and `Encode`s to safetensors bytes — the checkpoint
// format, PyTorch names — with the version number in the metadata. A receiver decodes against the
// parameter list of a model built from the run config, so bytes never choose what is allocated.
// `onpolicy.Policy.SetWeights` does not copy: it points its parameters at the version's values,
// which nothing writes.
//
// How an executor uses them. The local executor (`onpolicy.TrainLocal`, the `Train` of PPO
// and A2C) is the shortest composition: one rollout.Segments with the policy inline, then
// `learner.Learn(seg)`, on one goroutine, with the algorithm's historical streams (`ppo/actor` for the sampler, `ppo/env`, `ppo/init`,
// `ppo/minibatch`), so it trains bit-identical weights to the loops it replaced
// (`TestPPOSameBitsAsBefore`, `TestA2CSameBitsAsBefore`: sha256 of model.safetensors and of
// metrics.csv without wall columns, recorded from c7b923d for 8 configurations — Categorical and
// Gaussian heads, parallel and sequential, KL early stop, ReLU, RMSprop and Adam). A parallel
// executor gives each env worker its own sampler on `rng.New(seed, "env-worker", id)`, lets
// policy workers batch rows from any env workers (`TestPolicyRowsIndependentOfBatch`: batches of
// 1, 7 and 64 give identical rows; `TestSamplersAgreeWhateverTheBatch`), and moves versions
// through a `weights.Store` or its bytes. `examples/async` is the smallest such executor: an
// actor goroutine acting with `store.Latest()`, the learner publishing every k updates.
//
// Weight hand-off in the local loop: acting and learning take turns on one goroutine, so the
// policy reads the learner's parameters in place (`onpolicy.Policy.Follow`) rather than a
// `learner.Weights()` snapshot per iteration: a copy of every parameter per update is a large
// share of A2C's work, whose updates come every 8 envs × 5 steps. `TestFollowMatchesVersions` checks that following gives the same
// segments, version numbers and weights as handing a version over after every Learn — what the
// other executors do. The bootstraps (V of a truncated episode's final observation, LastValues)
// use the policy's optional `ValuesTo` (the critic alone; `rollout.Inline` falls back to the last
// column of full rows), so acting costs no more than a plain loop.
//
// The loss gradients are hand-written; `TestPPOLossGradients` and `TestA2CLossGradients` check
// dL/dlog π, dL/dH and dL/dV (clipped surrogate on both sides of the clip, clipped value loss,
// entropy, advantage normalisation) against central differences of independent float64
// references, as nn's head tests do.
package algo
