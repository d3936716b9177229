// Package algo is the contract between herd's learning algorithms
// (algo/ppo, algo/a2c, algo/dqn, algo/sac, algo/td3, algo/ddpg) and the code
// that runs them: `herd train`, `herd eval`, `herd bench learn`, tests and
// examples. It holds no algorithm itself.
//
// # The pieces
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
//     SegmentLearner — built by Spec.Pieces; SegmentWorker (segment.go),
//     the on-policy env worker that composes a policy and a sampler into
//     sample.Segments; RuntimeConfig, the `runtime:` header section that
//     chooses the executor.
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
// The vocabulary is DESIGN.md's: an env worker owns envs and a random
// stream, a policy worker runs the batched forward pass on a weight
// version, a learner turns samples into new versions, and a parameter
// service (weights.Store in one process, weights.Version.Encode's bytes
// across processes) hands versions out. For an on-policy algorithm:
//
//	pc, _ := spec.Pieces(h, cfg, algo.SpacesOf(envs))
//	policy, _ := pc.NewPolicy()                     // version 0: the run's initial weights
//	sampler, _ := pc.NewSampler(n, rng.New(seed, "env-worker", id))
//	learner, _ := pc.NewSegmentLearner()            // defer learner.Close()
//	worker := algo.NewSegmentWorker(id, envs, policy, sampler, γ)
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
package algo
