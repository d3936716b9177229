package flow

import (
	"fmt"

	"herd/algo"
)

// The plans of algorithms that are not plans themselves: the flow executor
// builds one from the pieces' capabilities (PlanOf), so an algorithm with
// a segment learner or a transition learner runs under flow without any
// flow code of its own.

// PlanOf returns the plan the flow executor runs for cfg: cfg's own when it
// is a Planner (a plan of the caller's), the asynchronous plan it declares
// when it is an algo.AsyncPlanner (A3C, IMPALA: AsyncPlan), else SyncPlan for a
// segment learner (a config that is an algo.Rollout), ApeXPlan for a
// transition learner whose run asked for actor priorities
// (Pieces.OffPolicy.NewPrioritizer), and ReplayPlan for any other
// transition learner (an algo.TransitionShape).
func PlanOf(cfg algo.Config, pieces *algo.Pieces) (Planner, error) {
	if p, ok := cfg.(Planner); ok {
		return p, nil
	}
	if ap, ok := cfg.(algo.AsyncPlanner); ok {
		return PlanFunc(func(r *Run) (Iter[Report], error) { return AsyncPlan(r, ap) }), nil
	}
	if ro, ok := cfg.(algo.Rollout); ok && pieces.NewSegmentLearner != nil {
		numEnvs, numSteps, gamma := ro.RolloutShape()
		return PlanFunc(func(r *Run) (Iter[Report], error) { return SyncPlan(r, numEnvs, numSteps, gamma) }), nil
	}
	if ts, ok := cfg.(algo.TransitionShape); ok && pieces.OffPolicy.NewTransitionLearner != nil {
		numEnvs, _ := ts.TransitionShape()
		if pieces.OffPolicy.NewPrioritizer != nil {
			syncSteps := 0
			if s, ok := cfg.(ApeXSyncer); ok {
				syncSteps = s.ApeXSync()
			}
			return PlanFunc(func(r *Run) (Iter[Report], error) { return ApeXPlan(r, numEnvs, syncSteps) }), nil
		}
		return PlanFunc(func(r *Run) (Iter[Report], error) { return ReplayPlan(r, numEnvs) }), nil
	}
	return nil, fmt.Errorf("%w: the config %T is no plan, and its pieces have neither a segment learner nor a transition learner", ErrConfig, cfg)
}

// PlanFunc is a function that builds a plan, as a Planner.
type PlanFunc func(r *Run) (Iter[Report], error)

// Plan calls f.
func (f PlanFunc) Plan(r *Run) (Iter[Report], error) { return f(r) }

// AsyncPlan is the asynchronous plan cfg declares (algo.AsyncPlan): A3C's
// (RLlib Flow, Listing 1) when its workers send gradients — each computes
// the gradient of the segment learner's loss on its own segment, on its
// own actor, and the driver applies them one at a time as they arrive and
// sends the new weights back to the worker whose gradient it applied —
// and IMPALA's (RLlib Flow's, without the learner thread's queue) when
// they send segments — the learner takes one update per segment as they
// arrive and broadcasts its weights, which a worker picks up before its
// next segment. Each worker keeps NumAsync items in flight, and an item is
// learned at most MaxPolicyLag updates after the weights it was made with
// (GatherAsyncLag). A config that is also an algo.Rollout has its budget
// rounded to whole rollouts, the steps the CLI announces
// (algo.Resolved.StepsRun).
func AsyncPlan(r *Run, cfg algo.AsyncPlanner) (Iter[Report], error) {
	s := cfg.AsyncPlan()
	workers, err := RolloutWorkers(r, s.NumEnvs, s.NumSteps, s.Gamma)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.(algo.Rollout); ok {
		r.RoundBudget(int64(s.NumEnvs * s.NumSteps))
	}
	if s.Gradients {
		grads, err := GatherAsyncLag(ParForEach(ParallelRollouts(workers), ComputeGradients(workers)), s.NumAsync, s.MaxPolicyLag)
		if err != nil {
			return nil, err
		}
		learner, err := SegmentLearner(r)
		if err != nil {
			return nil, err
		}
		return StandardMetricsReporting(r, ForEach(grads, ApplyGradients(workers, learner))), nil
	}
	segments, err := GatherAsyncLag(ParallelRollouts(workers), s.NumAsync, s.MaxPolicyLag)
	if err != nil {
		return nil, err
	}
	learner, err := SegmentLearner(r)
	if err != nil {
		return nil, err
	}
	return StandardMetricsReporting(r, ForEach(segments, TrainOneStep(workers, learner))), nil
}

// ApeXSyncer is the config of an algorithm whose Ape-X actors copy the
// learner's weights every ApeXSync() of their own env steps (0: every
// update reaches every worker before its next item).
type ApeXSyncer interface {
	ApeXSync() int
}

// SyncPlan is synchronous A2C and PPO as a dataflow plan (RLlib Flow,
// Listings 2 and 3): every worker's segment is gathered behind a barrier,
// the segments are joined into one batch of numEnvs × numSteps, the
// learner takes its update on it (one SegmentLearner.Learn: A2C's step,
// PPO's epochs of clipped minibatch updates), and the new weights reach
// every worker before its next segment. Only synchronous operators: the
// same seed gives the same parameters for any number of workers.
// runtime.num_async 2 collects each round while the learner learns on
// the previous one (GatherSyncAhead), on weights one update older, as the
// dist executor's inline env workers act; still the same bits for any
// number of workers.
func SyncPlan(r *Run, numEnvs, numSteps int, gamma float32) (Iter[Report], error) {
	workers, err := RolloutWorkers(r, numEnvs, numSteps, gamma)
	if err != nil {
		return nil, err
	}
	learner, err := SegmentLearner(r)
	if err != nil {
		return nil, err
	}
	r.SetBudget(int64(numEnvs * numSteps)) // whole rounds only
	rollouts := ConcatBatches(GatherSyncAhead(ParallelRollouts(workers), r.NumAsync()))
	return StandardMetricsReporting(r, ForEach(rollouts, TrainOneStep(workers, learner))), nil
}

// ReplayPlan is an off-policy algorithm (DQN, SAC, TD3, DDPG) as a
// dataflow plan (RLlib Flow's DQN listing): numEnvs envs spread over the
// workers (OffPolicySlotWorkers); a store sub-flow puts each vector step
// of them (GatherSync, joined in slot order) into replay, a replay
// sub-flow runs the updates due for the steps stored (the learner's own
// schedule: train frequency, gradient steps, target updates, priorities
// fed back) and broadcasts the weights; a round-robin Union alternates
// them on one goroutine, so a seed gives the same bits for any number of
// workers (unless apex_epsilon gives each its own ε).
func ReplayPlan(r *Run, numEnvs int) (Iter[Report], error) {
	workers, err := OffPolicySlotWorkers(r, numEnvs)
	if err != nil {
		return nil, err
	}
	learner, rb, err := TransitionLearner(r)
	if err != nil {
		return nil, err
	}
	r.SetBudget(int64(numEnvs)) // whole vector steps only
	ledger := &Ledger{}         // one goroutine pulls both sub-flows
	store := StoreToReplay(r, rb, ledger, ConcatExperience(GatherSync(OffPolicyRollouts(workers))))
	replay := Replay(r, rb, learner, workers, ledger)
	return StandardMetricsReporting(r, UnionRoundRobin(store, replay)), nil
}

// ApeXLocalBuffer is how many env steps an Ape-X worker sends as one
// item: its local buffer, whose priorities it computes together (the
// paper's actors send every 50 transitions; distexec.ChunkEnvSteps).
// Fewer steps per item cost more calls per env step over NATS (see
// docs/BENCHMARKS.md).
const ApeXLocalBuffer = 50

// ApeXLag is how many env steps ApeXPlan's store sub-flow may run ahead of
// the learner, which keeps the replay ratio the algorithm's.
const ApeXLag = 256

// ApeXPlan is Ape-X (Horgan et al. 2018) as a dataflow plan (RLlib Flow,
// Listing 4): workers act freely (GatherAsync), ApeXLocalBuffer env steps
// per item, and set each transition's initial priority with their own
// policy copy; the store sub-flow adds them to the prioritized replay
// while the replay sub-flow, on a goroutine of its own (UnionAsync), runs
// the updates due and publishes the weights, of which each worker copies
// the newest every syncSteps of its own env steps (the paper's periodic
// copy, not every update). The store sub-flow waits while it is more than
// ApeXLag env steps ahead of the learner. With apex_epsilon, worker i of
// N explores at the paper's fixed ε_i = apex_epsilon^(1 + 7i/(N−1))
// (OffPolicyWorkers). A checkpoint holds the store sub-flow between items
// until the learner has run the updates due for every stored step
// (Ledger.registerHold), so it is whole, though the run, whose workers'
// items arrive in timing's order, does not resume to the same bits.
func ApeXPlan(r *Run, numEnvs, syncSteps int) (Iter[Report], error) {
	workers, err := OffPolicyWorkers(r, numEnvs, max(1, ApeXLocalBuffer/numEnvs))
	if err != nil {
		return nil, err
	}
	workers.SyncEvery(syncSteps)
	learner, rb, err := TransitionLearner(r)
	if err != nil {
		return nil, err
	}
	storeRB, err := Fork(rb) // the store sub-flow's own workspaces over the same memory
	if err != nil {
		return nil, err
	}
	ledger := &Ledger{MaxLag: ApeXLag}
	store := StoreToReplay(r, storeRB, ledger, GatherAsync(OffPolicyRollouts(workers), 1))
	ledger.registerHold(r)
	replay := Replay(r, rb, learner, workers, ledger)
	workers.resumeLatest(learner)
	return StandardMetricsReporting(r, UnionAsync(store, replay)), nil
}
