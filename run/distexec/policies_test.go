package distexec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/dqn"
	"herd/algo/ppo"
	"herd/nn"
	"herd/run/distexec"
)

// TestSeveralPolicies trains several policies under dist, with 2 env
// workers, through algo.TrainRun as herd train does, on both transports:
//   - two PPO policies on simple_spread (agent_0 has policy a, the other
//     two agents policy b), served by 2 policy workers;
//   - the twin trainer on simple_tag: PPO for the 3 adversaries, DQN for
//     the runner (its env workers act with inline copies and push chunks
//     of transitions to its learner's replay);
//   - two DQN policies on simple_spread (no policy workers).
//
// Every step is learned, each policy's learner gets only its own agents'
// rows (its episodes are its rows' and all of them: a policy with k times
// the rows ends k times the episodes), nothing is dropped or repeated,
// each policy's algorithm logs its own columns, and the checkpoint holds
// every policy.
func TestSeveralPolicies(t *testing.T) {
	cases := []struct {
		name, file   string
		steps, eps   int64              // the run's steps and episodes (0: not fixed)
		policies     string             // herd.policies of the checkpoint
		want         map[string]float64 // summary.json's policies
		present      []string           // columns that must be there (the algorithms' own)
		policyWorker bool               // the policy workers served every policy
	}{{
		name: "ppo", file: `algo: ppo
env: mpe/simple_spread_v3?agent_id=true&max_cycles=10
seed: 4
steps: 1440
log_every: 240
runtime: {executor: dist, env_workers: 2, policy_workers: 2, transport: TR}
multiagent:
  policies: [a, b]
  policy_mapping: {agent_0: a, "agent_*": b}
ppo: {num_envs: 12, num_steps: 20, num_minibatches: 2, update_epochs: 2, hidden: [16]}
`,
		// 12 rows × 120 steps, episodes of 10 steps: 144, 48 of them a's.
		steps: 1440, eps: 144, policies: "a,b", want: map[string]float64{"policy/a/episodes": 48, "policy/b/episodes": 96},
		present: []string{"policy/a/losses/value_loss", "policy/b/losses/value_loss"}, policyWorker: true,
	}, {
		name: "ppo+dqn", file: `algo: ppo
env: mpe/simple_tag_v3?agent_id=true&max_cycles=10
seed: 4
steps: 1600
log_every: 320
runtime: {executor: dist, env_workers: 2, policy_workers: 2, transport: TR}
multiagent:
  policies: [adversary, good]
  policy_mapping: {"adversary_*": adversary, agent_0: good}
  algos: {good: dqn}
ppo: {num_envs: 16, num_steps: 20, num_minibatches: 2, update_epochs: 2, hidden: [16]}
dqn: {num_envs: 16, buffer_size: 1000, batch_size: 16, learning_starts: 100, train_frequency: 2, target_network_frequency: 50, net_arch: [16]}
`,
		// 16 rows (4 envs × 4 agents) × 100 steps, episodes of 10 steps:
		// 160, 120 of them the adversaries' 12 rows', 40 the runner's 4
		// rows' (in chunks of 10 steps: 2 per segment of 20).
		steps: 1600, eps: 160, policies: "adversary,good", want: map[string]float64{"policy/adversary/episodes": 120, "policy/good/episodes": 40},
		present: []string{"policy/adversary/losses/value_loss", "policy/good/losses/td_loss", "policy/good/charts/epsilon"}, policyWorker: true,
	}, {
		// The runner's chunks (2 steps of its 16 rows) come from the env
		// workers in other shares than the adversaries' segments, so the
		// runner's learner may end its budget while an env worker is
		// mid-segment: its parts must go on (drain) for the adversaries'
		// last segment. Its episodes are those of the chunks it learned,
		// which depends on the shares; the adversaries' do not.
		name: "ppo+dqn uneven", file: `algo: ppo
env: mpe/simple_tag_v3?agent_id=true&max_cycles=10
seed: 5
steps: 12800
log_every: 2560
runtime: {executor: dist, env_workers: 2, transport: TR}
multiagent:
  policies: [adversary, good]
  policy_mapping: {"adversary_*": adversary, agent_0: good}
  algos: {good: dqn}
ppo: {num_envs: 64, num_steps: 20, num_minibatches: 2, update_epochs: 2, hidden: [16]}
dqn: {num_envs: 64, buffer_size: 2000, batch_size: 16, learning_starts: 200, train_frequency: 2, target_network_frequency: 50, net_arch: [16]}
`,
		// 64 rows × 200 steps; the adversaries' 48 rows end 20 episodes each.
		steps: 12800, policies: "adversary,good", want: map[string]float64{"policy/adversary/episodes": 960},
		present: []string{"policy/good/losses/td_loss"}, policyWorker: true,
	}, {
		name: "dqn", file: `algo: dqn
env: mpe/simple_spread_v3?agent_id=true&max_cycles=6
seed: 4
steps: 720
log_every: 144
runtime: {executor: dist, env_workers: 2, transport: TR}
multiagent:
  policies: [a, b]
  policy_mapping: {agent_0: a, "agent_*": b}
dqn: {num_envs: 12, buffer_size: 1000, batch_size: 16, learning_starts: 60, train_frequency: 2, target_network_frequency: 50, net_arch: [16]}
`,
		// Rounds of 12 steps (a chunk of a's 4 rows; 2 of b's 8), 5 of them,
		// episodes of 6 steps (so that every chunk, from whichever env
		// worker, ends a whole number of them): 60 steps a row, 10
		// episodes, 40 a's and 80 b's.
		steps: 720, eps: 120, policies: "a,b", want: map[string]float64{"policy/a/episodes": 40, "policy/b/episodes": 80},
		present: []string{"policy/a/losses/td_loss", "policy/b/losses/td_loss"},
	}}
	for _, c := range cases {
		for _, tr := range []string{"inproc", "nats"} {
			t.Run(c.name+"/"+tr, func(t *testing.T) {
				file := strings.Replace(c.file, "TR", tr, 1)
				res, sum := trainFile(t, file, 120*time.Second, ppo.Spec(), dqn.Spec())
				if sum.Steps != c.steps || (c.eps > 0 && sum.Episodes != c.eps) {
					t.Errorf("summary: %d steps, %d episodes; want %d, %d", sum.Steps, sum.Episodes, c.steps, c.eps)
				}
				// summary.json's policies: each policy's last values.
				b, err := os.ReadFile(filepath.Join(res.Header.Out, "summary.json"))
				if err != nil {
					t.Fatal(err)
				}
				var sj struct{ Policies map[string]float64 }
				if err := json.Unmarshal(b, &sj); err != nil {
					t.Fatal(err)
				}
				last := sj.Policies
				want := maps.Clone(c.want)
				for _, id := range strings.Split(c.policies, ",") {
					for _, col := range []string{"dropped", "duplicates", "decode_errors"} {
						want["policy/"+id+"/dist/"+col] = 0
					}
				}
				for col, w := range want {
					if got, ok := last[col]; !ok || got != w {
						t.Errorf("summary.json %s = %v (present %v), want %v", col, got, ok, w)
					}
				}
				for _, col := range c.present {
					if _, ok := last[col]; !ok {
						t.Errorf("summary.json has no %s", col)
					}
				}
				if c.policyWorker {
					for _, id := range strings.Split(c.policies, ",") {
						// A DQN policy's env workers act with inline copies.
						if rows := last["policy/"+id+"/dist/batch_rows_mean"]; (rows >= 1) != (id != "good") {
							t.Errorf("policy %s: batch rows %v; want ≥ 1 exactly for the on-policy policies (the policy workers serve them)", id, rows)
						}
					}
				}
				b, err = os.ReadFile(filepath.Join(res.Header.Out, algo.ModelFile))
				if err != nil {
					t.Fatal(err)
				}
				ck, err := nn.ReadSafetensors(bytes.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				if got := ck.Metadata["herd.policies"]; got != c.policies {
					t.Errorf("checkpoint policies %q, want %s", got, c.policies)
				}
			})
		}
	}
}

// TestSeveralPoliciesRefused: what the topology of several policies cannot
// run is refused before anything starts, naming the setting: policy
// workers when every policy is off-policy (their env workers act with
// inline copies), and inline inference when one is on-policy.
func TestSeveralPoliciesRefused(t *testing.T) {
	const tag = `env: mpe/simple_tag_v3?agent_id=true
steps: 16000
multiagent:
  policies: [adversary, good]
  policy_mapping: {"adversary_*": adversary, agent_0: good}
`
	for _, c := range []struct{ name, file, want string }{
		{"dqn with policy workers", "algo: dqn\n" + tag + "runtime: {executor: dist, policy_workers: 1}\ndqn: {num_envs: 16}\n", "policy_workers 1"},
		{"ppo+dqn inline", "algo: ppo\n" + tag + "  algos: {good: dqn}\nruntime: {executor: dist, inference: inline}\nppo: {num_envs: 16}\ndqn: {num_envs: 16}\n", "inline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := algo.Resolve([]byte(c.file), []algo.Spec{ppo.Spec(), dqn.Spec()}, algo.Overrides{})
			if err == nil {
				_, err = distexec.PrepareRun(res)
			}
			if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v; want an ErrConfig naming %q", err, c.want)
			}
		})
	}
	// The same runs without the setting are prepared, with no policy
	// worker for every policy off-policy and one for a mix.
	for file, workers := range map[string]int{
		"algo: dqn\n" + tag + "runtime: {executor: dist}\ndqn: {num_envs: 16}\n":                                            0,
		"algo: ppo\n" + tag + "  algos: {good: dqn}\nruntime: {executor: dist}\nppo: {num_envs: 16}\ndqn: {num_envs: 16}\n": 1,
	} {
		res, err := algo.Resolve([]byte(file), []algo.Spec{ppo.Spec(), dqn.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := distexec.PrepareRun(res)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got := st.PolicyWorkers(0); got != workers {
			t.Errorf("%s: %d policy workers, want %d", file, got, workers)
		}
	}
}
