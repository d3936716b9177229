// Package distexec is the `dist` executor: an on-policy algorithm's pieces
// run as env workers, policy workers and a learner (package dist/worker)
// joined only by package dist's streams, inside one process, over either
// the in-process twin or NATS (an embedded server on loopback, or an
// external one), every role on its own connection as if it were its own
// process.
//
//	runtime:
//	  executor: dist
//	  env_workers: 2      # E env workers, each stepping num_envs envs (default 1)
//	  policy_workers: 1   # P policy workers (default 1)
//	  transport: nats     # inproc (default) or nats
//	  nats_url: ""        # an external server or cluster; empty: embedded on 127.0.0.1
//
// Each env worker steps the config's num_envs envs and pushes segments of
// num_steps × num_envs, the same shape the local loop learns from, so E env
// workers gather E times the envs; the learner learns from segments in the
// order they arrive and publishes a weights version after each. The run's
// global step counts the steps of the segments learned from; the run ends
// after `steps`. Unlike HTS, results depend on timing (which segment
// arrives first, which weights version a policy worker holds): this is
// the asynchronous, scale-out executor.
//
// Off-policy algorithms (DQN, SAC, TD3, DDPG) run the Ape-X topology of
// dist/worker: E env workers with inline policy copies pushing chunks of
// ChunkEnvSteps env steps of transitions (with initial priorities under
// dqn's initial_priorities: actor), no policy workers (policy_workers is
// refused), and the learner holding the replay. runtime.refresh_every and
// publish_every work as under pal. configs/dqn-cartpole-dist.yaml is the
// example.
package distexec
