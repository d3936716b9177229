package distexec_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/dqn"
	"herd/algo/ppo"
	"herd/env"
)

// TestMixedActionSpaces: toy/signal_v0's speaker (Discrete(2)) and
// listener (Discrete(3), or a Box of one value) train under dist with 2
// env workers, each policy's network sized to its own agents' action
// space: PPO for both, and PPO for the speaker with DQN for the listener
// (an inline copy in the env workers). The checkpoint loads back and acts
// in each agent's own space.
func TestMixedActionSpaces(t *testing.T) {
	const dqnSection = "dqn: {num_envs: 16, buffer_size: 1000, batch_size: 16, learning_starts: 100, train_frequency: 2, target_network_frequency: 50, net_arch: [16]}\n"
	for _, c := range []struct{ name, kw, algos, dqn string }{
		{"ppo", "", "", ""},
		{"ppo box", "&continuous_listener=true", "", ""},
		{"ppo+dqn", "", "  algos: {listener: dqn}\n", dqnSection},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := `algo: ppo
env: toy/signal_v0?targets=2&max_cycles=4` + c.kw + `
seed: 1
steps: 2560
log_every: 640
runtime: {executor: dist, env_workers: 2, policy_workers: 2}
multiagent:
  policies: [speaker, listener]
  policy_mapping: {speaker_0: speaker, listener_0: listener}
` + c.algos + `ppo: {num_envs: 16, num_steps: 16, num_minibatches: 2, update_epochs: 2, hidden: [16]}
` + c.dqn
			res, sum := trainFile(t, file, 120*time.Second, ppo.Spec(), dqn.Spec())
			if sum.Steps != 2560 || sum.Policies["policy/listener/episodes"] != 320 || sum.Policies["policy/speaker/episodes"] != 320 {
				t.Errorf("summary: %d steps, policies %v; want 2560 steps, 320 episodes each", sum.Steps, sum.Policies)
			}
			p, err := algo.LoadPolicies(filepath.Join(res.Header.Out, algo.ModelFile), res)
			if err != nil {
				t.Fatal(err)
			}
			pe, err := res.Header.Envs.MakeParallel(res.Header.Env)
			if err != nil {
				t.Fatal(err)
			}
			defer pe.Close()
			for _, agent := range pe.PossibleAgents() {
				sp, _ := pe.ActionSpace(agent)
				if a := p.ActAgent(make([]float32, sp.Dim()), make([]float32, 3), agent); len(a) != sp.Dim() {
					t.Errorf("%s: action %v, want one of %v", agent, a, sp)
				}
			}
			if _, err := algo.EvaluateAgents(context.Background(), p, env.Maker{}, res.Header.Env, 2, 1); err != nil {
				t.Error(err)
			}
		})
	}
}
