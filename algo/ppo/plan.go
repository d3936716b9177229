package ppo

import "herd/flow"

// Plan is PPO as a dataflow plan (RLlib Flow, Listing 3): every worker's
// segment is gathered behind a barrier, the segments are joined into one
// batch of num_envs × num_steps, the learner runs its epochs of clipped
// minibatch updates on it (TrainOneStep: one Learn call), and the new
// weights reach every worker before its next segment. Only synchronous
// operators: the same seed gives the same parameters for any number of
// workers.
// runtime.num_async 2 collects each round while the learner learns on the
// previous one (GatherSyncAhead), on weights one update older, as the
// dist executor's inline env workers act; still the same bits for any
// number of workers.
func (c *Config) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	workers, err := flow.RolloutWorkers(r, c.NumEnvs, c.NumSteps, c.Gamma)
	if err != nil {
		return nil, err
	}
	learner, err := flow.SegmentLearner(r)
	if err != nil {
		return nil, err
	}
	r.SetBudget(int64(c.NumEnvs * c.NumSteps)) // whole rounds only
	rollouts := flow.ConcatBatches(flow.GatherSyncAhead(flow.ParallelRollouts(workers), r.NumAsync()))
	return flow.StandardMetricsReporting(r, flow.ForEach(rollouts, flow.TrainOneStep(workers, learner))), nil
}
