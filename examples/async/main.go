// Command async drives the algorithm pieces by hand: a two-goroutine
// asynchronous learner. An actor goroutine steps CartPole-v1 with a policy
// and a sampler, acting with the newest weights in the parameter service
// (a weights.Store); the learner (the main goroutine) runs PPO's learner
// on each segment it receives and publishes a new version every k updates.
// The actor may act with weights a few versions old; PPO's ratio
// π/π_behaviour (the segment carries the behaviour log-probs) corrects for
// the lag within its clip range.
//
//	go run ./examples/async -steps 100000 -publish-every 2
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"herd/algo"
	"herd/algo/ppo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

func main() {
	steps := flag.Int64("steps", 100_000, "environment steps")
	k := flag.Int("publish-every", 2, "publish the weights every k updates")
	seed := flag.Uint64("seed", 1, "run seed")
	flag.Parse()
	if _, err := run(context.Background(), os.Stdout, *seed, *steps, *k); err != nil {
		fmt.Fprintln(os.Stderr, "async:", err)
		os.Exit(1)
	}
}

// run trains and returns the mean return of the last 20 training episodes.
func run(ctx context.Context, w io.Writer, seed uint64, steps int64, k int) (float64, error) {
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Seed, h.Steps = "ppo", "CartPole-v1", seed, steps
	cfg := ppo.DefaultConfig()
	cfg.Parallel = false // one goroutine each for acting and learning
	envs, err := env.MakeVector(h.Env, cfg.NumEnvs, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		return 0, err
	}
	defer envs.Close()
	sp := algo.SpacesOf(envs)
	pc, err := ppo.Pieces(h, &cfg, sp)
	if err != nil {
		return 0, err
	}
	policy, err := pc.NewPolicy()
	if err != nil {
		return 0, err
	}
	sampler, err := pc.NewSampler(cfg.NumEnvs, rng.New(seed, "env-worker", 0))
	if err != nil {
		return 0, err
	}
	learner, err := pc.NewSegmentLearner()
	if err != nil {
		return 0, err
	}
	defer learner.Close()
	store := weights.NewStore(learner.Weights()) // version 0
	iterations := int(steps / int64(cfg.NumEnvs*cfg.NumSteps))
	obsDim := sp.Obs.(env.Box).Dim()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	segs := make(chan *sample.Segment, 1) // back-pressure: the actor runs at most two segments ahead
	actorDone := make(chan error, 1)

	// The actor: an env worker whose policy follows the store.
	go func() {
		defer close(segs)
		worker := rollout.NewSegments(0, envs, rollout.NewInline(policy, sampler), cfg.Gamma)
		err := worker.Reset(int64(seed))
		for i := 0; err == nil && i < iterations; i++ {
			if v := store.Latest(); v.N != policy.Version() {
				err = policy.SetWeights(v)
			}
			seg := sample.NewSegment(cfg.NumSteps, cfg.NumEnvs, obsDim, 1)
			if err == nil {
				err = worker.Collect(seg)
			}
			if err == nil {
				select {
				case segs <- seg:
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
		}
		actorDone <- err
	}()

	// The learner: one update per segment, a new version every k updates.
	var returns []float64
	var lag, updates, published uint64
	for seg := range segs {
		for _, e := range seg.Episodes {
			returns = append(returns, e.Return)
		}
		lag += updates - seg.Version
		if _, err = learner.Learn(ctx, seg); err != nil {
			break
		}
		if updates++; updates%uint64(k) == 0 {
			if err = store.Publish(learner.Weights()); err != nil {
				break
			}
			published++
		}
	}
	cancel() // stops the actor if the learner stopped first
	for range segs {
	}
	if aerr := <-actorDone; err == nil && aerr != nil {
		err = aerr
	}
	if err != nil {
		return 0, fmt.Errorf("after %d updates: %w", updates, err)
	}
	if len(returns) < 20 {
		return 0, fmt.Errorf("only %d episodes in %d steps", len(returns), steps)
	}
	first, last := mean(returns[:20]), mean(returns[len(returns)-20:])
	fmt.Fprintf(w, "%d updates, %d versions published (the last is %d), segments acted %.1f updates behind on average;\n",
		updates, published, store.Latest().N, float64(lag)/float64(updates))
	fmt.Fprintf(w, "mean return of the first 20 episodes %.1f, of the last 20 %.1f\n", first, last)
	return last, nil
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
