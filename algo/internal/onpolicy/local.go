package onpolicy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
)

// Local sizes the local executor's loop.
type Local struct {
	NumEnvs, NumSteps int
	// Gamma is the discount of the truncation bootstrap.
	Gamma float32
}

// TrainLocal is the local executor of PPO and A2C: one env worker and one
// learner taking turns on the caller's goroutine. It is the shortest
// composition of the pieces (NewPieces): each iteration collects one
// segment of NumSteps × NumEnvs steps with the policy and the sampler and
// learns on it; the policy follows the learner's parameters. The
// random streams are the algorithm's historical ones (name+"/actor" for
// the sampler, name+"/env" for the resets, name+"/init" inside the
// pieces), so a seed trains the same weights as before the pieces existed.
//
// It returns the trained agent; on cancellation of ctx it stops between
// iterations and returns the agent trained so far with ctx.Err().
func TrainLocal(ctx context.Context, rt *algo.Runtime, name string, lc Local, pieces func(algo.Spaces) (*algo.Pieces, error)) (*Agent, error) {
	h := rt.Header
	numIterations := int(h.Steps / int64(lc.NumEnvs*lc.NumSteps))

	// Seeds: one stream per role (internal/rng).
	actSrc := rng.Source(h.Seed, name+"/actor", 0) // kept: a checkpoint saves its state
	rAct := rand.New(actSrc)
	envSeed := int64(rng.Derive(h.Seed, name+"/env", 0) >> 1)

	// Envs, and the pieces for their spaces.
	envs, err := rt.MakeEnvs(lc.NumEnvs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer envs.Close()
	sp := algo.SpacesOf(envs)
	pc, err := pieces(sp)
	if err != nil {
		return nil, err
	}
	policy, err := pc.NewPolicy()
	if err != nil {
		return nil, err
	}
	sampler, err := pc.NewSampler(lc.NumEnvs, rAct)
	if err != nil {
		return nil, err
	}
	sl, err := pc.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	defer sl.Close() // stops the parallel worker; the agent stays usable
	base, ok := sl.(interface{ base() *Learner })
	p, ok2 := policy.(*Policy)
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s: pieces %T and %T are not onpolicy's", name, sl, policy)
	}
	learner := base.base()
	agent := learner.Agent
	rt.Track(agent) // divergence guard (algo.TrainRun)
	// Acting and learning take turns on this goroutine, so the policy
	// reads the learner's parameters in place instead of a snapshot per
	// iteration; executors that act while the learner learns hand
	// versions over (learner.Weights, policy.SetWeights).
	if err := p.Follow(learner); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	// The env worker and its segment (storage).
	worker := rollout.NewSegments(0, envs, rollout.NewInline(policy, sampler), lc.Gamma)
	seg := sample.NewSegment(lc.NumSteps, lc.NumEnvs, agent.ObsDim, agent.ActDim)
	if err := worker.Reset(envSeed); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	// Checkpoints (algo.Checkpoints): the loop's whole state at an
	// iteration boundary, restored here when the run resumes.
	st := &local{learner: learner, sl: sl, policy: p, sampler: actSrc, worker: worker, envs: envs}
	ck := rt.Checkpoints
	if ck != nil {
		if err := st.snapshotable(ck); err != nil {
			if ck.Restored() != nil {
				return nil, fmt.Errorf("%s: cannot resume: %w", name, err)
			}
			ck.Disable(err.Error())
			ck = nil
		}
	}
	if ck != nil && ck.Restored() != nil {
		if err := st.restore(ck.Restored()); err != nil {
			return nil, fmt.Errorf("%s: resume from step %d: %w", name, ck.Restored().Header.Step, err)
		}
		if st.restart {
			if err := worker.Reset(algo.RestartSeed(h.Seed, name+"/env", st.step)); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			ck.RestartEnvs(lc.NumEnvs)
		}
	}
	save := func() error {
		if ck == nil {
			return nil
		}
		sections, err := st.save()
		if err == nil {
			err = ck.Save(st.step, sections)
		}
		if err != nil {
			return fmt.Errorf("%s: checkpoint at step %d not saved: %w", name, st.step, err)
		}
		return nil
	}

	// An iteration is the unit of a checkpoint, so a cancellation stops
	// the loop between iterations: the update of a segment already
	// gathered is not cut (learnCtx), and the interrupted run's
	// checkpoint is at the boundary where it stopped.
	learnCtx := ctx
	if ck != nil {
		learnCtx = context.WithoutCancel(ctx)
	}
	for st.iteration < numIterations {
		if err := ctx.Err(); err != nil {
			// A diverged run (the guard's cancel) keeps no checkpoint
			// of its non-finite parameters. A failed write is the
			// caller's to report (Checkpoints.Err), the run being
			// interrupted all the same; a state that could not be
			// gathered is this loop's failure.
			if !errors.Is(context.Cause(ctx), algo.ErrDiverged) {
				if serr := save(); serr != nil && ck.Err() == nil {
					return agent, serr
				}
			}
			return agent, err
		}
		// Rollout: NumSteps steps of every env with the current policy
		// (truncations bootstrapped from the final observation).
		if err := worker.Collect(seg); err != nil {
			return agent, fmt.Errorf("%s: %w", name, err)
		}
		st.step = rollout.LogEpisodes(rt.Log, seg, st.step)

		// Learn: advantages, then the algorithm's update (the next
		// rollout acts with the new weights).
		stats, err := sl.Learn(learnCtx, seg)
		if err != nil {
			return agent, fmt.Errorf("%s: %w", name, err)
		}
		st.iteration++

		// Log.
		for _, s := range stats {
			rt.Log.Scalar(s.Name, s.Value)
		}
		rt.Log.Step(st.step)
		if ck != nil && ck.Due(st.step) && st.iteration < numIterations {
			if err := save(); err != nil {
				return agent, err
			}
		}
	}
	if err := save(); err != nil {
		return agent, err
	}
	return agent, nil
}
