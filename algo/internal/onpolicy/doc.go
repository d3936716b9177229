// Package onpolicy holds what PPO and A2C share, so that each algorithm's
// file keeps only its loss: the actor-critic Agent, the Rollout storage and
// collection loop, and the advantage math (GAE, returns, normalisation,
// explained variance).
//
// # The driving loop
//
//	agent, _ := onpolicy.NewAgent(envs.ObservationSpace(), envs.ActionSpace(), cfg, rInit)
//	defer agent.Close()
//	ro := onpolicy.NewRollout(numSteps, numEnvs, agent.ObsDim, agent.ActDim)
//	ro.Reset(envs, seed)
//	for … {
//		ro.Collect(envs, agent, rAct, log, &globalStep, γ) // T steps, truncation bootstrapped
//		ro.Advantages(γ, λ)                              // GAE → ro.Adv, ro.Returns
//		// forward, the algorithm's loss halves, backward (grads zeroed first):
//		agent.Learn(obs, actions, B, policyLoss, valueLoss)
//		nn.ClipGradNorm(agent.Params(), maxNorm)
//		opt.Step(agent.Params())
//	}
//
// policyLoss gets log π(a|s) and H per row and writes dL/dlog π and dL/dH;
// valueLoss gets V(s) and writes dL/dV. (Evaluate + Backward do the same in
// two calls, for code that needs the outputs of both networks at once.)
//
// # Departures from nn, and why
//
// The agent's networks (net) are stacks of single-layer nn.MLPs with the
// hidden activation applied here: nn's Tanh calls float64 math.Tanh per
// element, which was 60% of PPO's CartPole time; tanhTo, a float32
// piecewise-cubic Hermite interpolant accurate to two ulps, is ~20x faster.
// GEMMs, init, optimizers and checkpoint naming are nn's, and TestNetMatchesMLP
// checks that outputs and gradients equal nn.MLP's.
//
// # Concurrency
//
// With AgentConfig.Parallel the agent owns one worker goroutine (a
// twin.Pair, which hands off by polling rather than parking) that
// computes the critic's half of Learn (forward, valueLoss, backward) while
// the caller computes the actor's — one hand-off per minibatch; Close stops
// it and waits. Results are identical with and without it, because
// each network is computed by exactly one goroutine in a fixed order and the
// two meet only at gradient clipping, after both are done. Otherwise an
// Agent and a Rollout are used by one goroutine.
package onpolicy
