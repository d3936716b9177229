package distexec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/ppo"
	"herd/nn"
	"herd/run"
)

// TestSeveralPolicies trains two PPO policies on simple_spread under dist
// (agent_0 has policy a, the other two agents policy b), with 2 env
// workers and 2 policy workers that serve both policies, through
// algo.TrainRun as herd train does: every step is learned, each policy's
// learner gets only its own agents' rows (b's two agents end twice as many
// episodes as a's one), nothing is dropped or repeated, and the
// checkpoint holds both policies.
func TestSeveralPolicies(t *testing.T) {
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			file := `algo: ppo
env: mpe/simple_spread_v3?agent_id=true&max_cycles=10
seed: 4
steps: 1440
log_every: 240
runtime: {executor: dist, env_workers: 2, policy_workers: 2, transport: ` + tr + `}
multiagent:
  policies: [a, b]
  policy_mapping: {agent_0: a, "agent_*": b}
ppo: {num_envs: 12, num_steps: 20, num_minibatches: 2, update_epochs: 2, hidden: [16]}
`
			res, err := algo.Resolve([]byte(file), []algo.Spec{ppo.Spec()}, algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			res.Header.Out = t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			sum, err := algo.TrainRun(ctx, res, algo.RunOptions{Executors: run.Executors()})
			if err != nil {
				t.Fatal(err)
			}
			// 12 rows × 120 steps, episodes of 10 steps: 144, 48 of them a's.
			if sum.Steps != 1440 || sum.Episodes != 144 {
				t.Errorf("summary: %d steps, %d episodes; want 1440, 144", sum.Steps, sum.Episodes)
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
			for col, want := range map[string]float64{"policy/a/episodes": 48, "policy/b/episodes": 96,
				"policy/a/dist/dropped": 0, "policy/b/dist/dropped": 0, "policy/a/dist/duplicates": 0, "policy/b/dist/duplicates": 0,
				"policy/a/dist/decode_errors": 0, "policy/b/dist/decode_errors": 0} {
				if got, ok := last[col]; !ok || got != want {
					t.Errorf("summary.json %s = %v (present %v), want %v", col, got, ok, want)
				}
			}
			if a, b := last["policy/a/dist/batch_rows_mean"], last["policy/b/dist/batch_rows_mean"]; a < 1 || b < 1 {
				t.Errorf("batch rows: a %v, b %v; want ≥ 1 (the policy workers served both)", a, b)
			}
			b, err = os.ReadFile(filepath.Join(res.Header.Out, algo.ModelFile))
			if err != nil {
				t.Fatal(err)
			}
			ck, err := nn.ReadSafetensors(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if got := ck.Metadata["herd.policies"]; got != "a,b" {
				t.Errorf("checkpoint policies %q, want a,b", got)
			}
		})
	}
}
