package dqn

import "herd/flow"

// Plan is DQN as a dataflow plan, or Ape-X when the config asks for actor
// priorities (initial_priorities: actor): see DQNPlan and ApexPlan.
func (c *Config) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	if c.InitialPriorities == PrioritiesActor {
		return c.ApexPlan(r)
	}
	return c.DQNPlan(r)
}

// DQNPlan is DQN as a dataflow plan (RLlib Flow's DQN listing): num_envs
// envs spread over the workers (flow.OffPolicySlotWorkers); a store
// sub-flow puts each vector step of them (GatherSync, joined in slot
// order) into replay, a replay sub-flow runs the updates due for the steps
// stored (train_frequency, gradient_steps, the target network on its
// schedule, priorities fed back) and broadcasts the weights; a round-robin
// Union alternates them on one goroutine, so a seed gives the same bits
// for any number of workers (unless apex_epsilon gives each its own ε).
func (c *Config) DQNPlan(r *flow.Run) (flow.Iter[flow.Report], error) {
	workers, err := flow.OffPolicySlotWorkers(r, c.NumEnvs)
	if err != nil {
		return nil, err
	}
	learner, rb, err := flow.TransitionLearner(r)
	if err != nil {
		return nil, err
	}
	r.SetBudget(int64(c.NumEnvs)) // whole vector steps only
	ledger := &flow.Ledger{}      // one goroutine pulls both sub-flows
	store := flow.StoreToReplay(r, rb, ledger, flow.ConcatExperience(flow.GatherSync(flow.OffPolicyRollouts(workers))))
	replay := flow.Replay(r, rb, learner, workers, ledger)
	return flow.StandardMetricsReporting(r, flow.UnionRoundRobin(store, replay)), nil
}

// ApeXLocalBuffer is how many env steps an Ape-X worker sends as one
// item: its local buffer, whose priorities it computes together (the
// paper's actors send every 50 transitions; distexec.ChunkEnvSteps).
// Items of train_frequency (10) steps took five times the calls: over
// NATS, 2.1 of 7.2 CPU seconds for 200k steps went to everything but the
// learner, against 0.8 of 5.8 with 50.
const ApeXLocalBuffer = 50

// ApexPlan is Ape-X (Horgan et al. 2018) as a dataflow plan (RLlib Flow,
// Listing 4): workers act freely (GatherAsync), ApeXLocalBuffer env steps
// per item, and set each transition's initial priority with their own
// policy copy; the store sub-flow adds
// them to the prioritized replay while the replay sub-flow, on a goroutine
// of its own (UnionAsync), runs the updates due and publishes the weights,
// of which each worker copies the newest every apex_sync_steps of its own
// env steps (the paper's periodic copy, not every update). The store sub-flow waits
// while it is more than 256 env steps ahead of the learner, which keeps the
// replay ratio the algorithm's. With apex_epsilon, worker i of N explores
// at the paper's fixed ε_i = apex_epsilon^(1 + 7i/(N−1)) (flow.OffPolicyWorkers).
func (c *Config) ApexPlan(r *flow.Run) (flow.Iter[flow.Report], error) {
	workers, err := flow.OffPolicyWorkers(r, c.NumEnvs, max(1, ApeXLocalBuffer/c.NumEnvs))
	if err != nil {
		return nil, err
	}
	workers.SyncEvery(c.ApeXSyncSteps)
	learner, rb, err := flow.TransitionLearner(r)
	if err != nil {
		return nil, err
	}
	storeRB, err := flow.Fork(rb) // the store sub-flow's own workspaces over the same memory
	if err != nil {
		return nil, err
	}
	ledger := &flow.Ledger{MaxLag: 256}
	store := flow.StoreToReplay(r, storeRB, ledger, flow.GatherAsync(flow.OffPolicyRollouts(workers), 1))
	replay := flow.Replay(r, rb, learner, workers, ledger)
	return flow.StandardMetricsReporting(r, flow.UnionAsync(store, replay)), nil
}
