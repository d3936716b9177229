// Package algo is the contract between herd's learning algorithms
// (algo/ppo, algo/a2c, algo/dqn, algo/sac, algo/td3, algo/ddpg) and the code
// that runs them: `herd train`, `herd eval`, `herd bench learn`, tests and
// examples. It holds no algorithm itself.
//
// # The pieces
//
//   - Header: the keys every run shares (algo, env, seed, steps, out,
//     log_every).
//   - Config: an algorithm's own typed settings, one struct with yaml tags,
//     defaults from Spec.NewConfig, checked by Validate.
//   - Spec: name, config constructor, Train and LoadPolicy. algo/all lists
//     the Specs the CLI knows.
//   - Runtime and Logger: what Train reports to (per-episode return and
//     length, named scalars, progress in steps). metrics.Recorder is the
//     Logger that writes metrics.csv, summary.json and curve.png.
//   - Model and Policy: what Train returns, saved as model.safetensors, and
//     the deterministic policy that `herd eval` runs.
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
