package multipolicy

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"herd/algo"
	"herd/algo/dqn"
	"herd/algo/ppo"
	"herd/env"
	"herd/run/pal"
)

// probeConfig is the config of the probe algorithm.
type probeConfig struct {
	NumEnvs int `yaml:"num_envs"`
}

func (c *probeConfig) Validate(algo.Header) error {
	if c.NumEnvs < 1 {
		return fmt.Errorf("%w: num_envs", algo.ErrConfig)
	}
	return nil
}

// probe is an algorithm that acts with a fixed action per agent and
// records which agents' rows it was handed (the one-hot agent id) and the
// rewards of each.
type probe struct {
	mu      sync.Mutex
	seen    [][]int // per call of Train: the agent index of each row
	rewards [][]float64
	steps   []int64
}

type probeModel struct{}

func (probeModel) Act(dst, _ []float32) []float32 { return dst }
func (probeModel) Save(string) error              { return nil }

func (p *probe) spec() algo.Spec {
	return algo.Spec{Name: "probe", Can: algo.CanAgentRows, NewConfig: func() algo.Config { return &probeConfig{NumEnvs: 1} },
		LoadPolicy: func(string, algo.Header, algo.Config) (algo.Policy, error) { return probeModel{}, nil },
		Train: func(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
			cfg := c.(*probeConfig)
			envs, err := rt.MakeEnvs(cfg.NumEnvs)
			if err != nil {
				return nil, err
			}
			defer envs.Close()
			b, err := envs.Reset(int64(rt.Header.Seed))
			if err != nil {
				return nil, err
			}
			const nAgents = 4 // simple_tag: adversary_0..2, agent_0
			idOf := func(b *env.Batch, r int) int {
				row := b.ObsRow(r)
				return slices.Index(row[len(row)-nAgents:], 1)
			}
			var ids []int
			for r := range envs.NumEnvs() {
				ids = append(ids, idOf(b, r))
			}
			rew := make([]float64, envs.NumEnvs())
			acts := make([]float32, envs.NumEnvs())
			var steps int64
			for steps < rt.Header.Steps {
				for r := range acts {
					acts[r] = float32(ids[r] % 5) // each agent its own move
				}
				if b, err = envs.Step(acts); err != nil {
					return probeModel{}, err
				}
				for r := range envs.NumEnvs() {
					if id := idOf(b, r); id != ids[r] {
						return probeModel{}, fmt.Errorf("row %d was agent %d, now %d", r, ids[r], id)
					}
					rew[r] += float64(b.Rewards[r])
				}
				steps += int64(envs.NumEnvs())
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			p.seen = append(p.seen, ids)
			p.rewards = append(p.rewards, rew)
			p.steps = append(p.steps, steps)
			return probeModel{}, nil
		}}
}

const tagConfig = `algo: probe
env: mpe/simple_tag_v3?agent_id=true
seed: 3
steps: 800
multiagent:
  policies: [adversary, good]
  policy_mapping: {"adversary_*": adversary, agent_0: good}
probe: {num_envs: 8}
`

// TestPoliciesSeeOnlyTheirAgents: with simple_tag's adversaries mapped to
// one policy and the good agent to another, each policy's Train is handed
// only its own agents' rows (2 envs: 6 adversary rows, 2 good rows), in
// row order, and the rewards it sees are those agents' own rewards in a
// whole-vector run with the same actions.
func TestPoliciesSeeOnlyTheirAgents(t *testing.T) {
	p := &probe{}
	res, err := algo.Resolve([]byte(tagConfig), []algo.Spec{p.spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.seen) != 2 {
		t.Fatalf("%d policies trained, want 2", len(p.seen))
	}
	// Policy order of completion is free; sort by what they saw.
	adv, good := 0, 1
	if len(p.seen[0]) == 2 {
		adv, good = 1, 0
	}
	if want := []int{0, 1, 2, 0, 1, 2}; !slices.Equal(p.seen[adv], want) {
		t.Errorf("adversary policy saw agents %v, want %v", p.seen[adv], want)
	}
	if want := []int{3, 3}; !slices.Equal(p.seen[good], want) {
		t.Errorf("good policy saw agents %v, want %v", p.seen[good], want)
	}
	// 800 steps of 8 rows: 100 joint steps; each policy counts its rows.
	if p.steps[adv] != 600 || p.steps[good] != 200 {
		t.Errorf("policy steps %d and %d, want 600 and 200", p.steps[adv], p.steps[good])
	}
	// The same actions on the whole vector give the same rewards per row.
	v, err := env.MakeVector("mpe/simple_tag_v3?agent_id=true", 8, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Reset(3); err != nil {
		t.Fatal(err)
	}
	acts := []float32{0, 1, 2, 3, 0, 1, 2, 3}
	rew := make([]float64, 8)
	for range 100 {
		b, err := v.Step(acts)
		if err != nil {
			t.Fatal(err)
		}
		for r := range rew {
			rew[r] += float64(b.Rewards[r])
		}
	}
	wantAdv := []float64{rew[0], rew[1], rew[2], rew[4], rew[5], rew[6]}
	if !slices.Equal(p.rewards[adv], wantAdv) || !slices.Equal(p.rewards[good], []float64{rew[3], rew[7]}) {
		t.Errorf("rewards seen %v and %v, want %v and %v", p.rewards[adv], p.rewards[good], wantAdv, []float64{rew[3], rew[7]})
	}
	if rew[3] == 0 && rew[0] == 0 {
		t.Error("no reward at all: the check compares nothing")
	}
	ps, ok := m.(*algo.Policies)
	if !ok || !slices.Equal(ps.Of, []int{0, 0, 0, 1}) {
		t.Fatalf("model %T %+v, want *algo.Policies mapping adversaries to 0, agent_0 to 1", m, m)
	}
}

// TestBadMappings: mapping problems are config errors before anything runs.
func TestBadMappings(t *testing.T) {
	p := &probe{}
	for _, c := range []struct{ mapping, want string }{
		{`{"adversary_*": adversary}`, "agent_0 has no policy"},
		{`{"adversary_*": adversary, "agent_0": good, "adversary_1": nobody}`, "not in multiagent.policies"},
		{`{"*": adversary, "agent_*": good}`, "matches"},
		{`{"*": adversary}`, "acts for no agent"},
	} {
		file := strings.Replace(tagConfig, `{"adversary_*": adversary, agent_0: good}`, c.mapping, 1)
		res, err := algo.Resolve([]byte(file), []algo.Spec{p.spec()}, algo.Overrides{})
		if err == nil {
			_, err = Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config)
		}
		if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mapping %s: err %v, want ErrConfig containing %q", c.mapping, err, c.want)
		}
	}
	for _, file := range []string{
		strings.Replace(tagConfig, "mpe/simple_tag_v3?agent_id=true", "CartPole-v1", 1),
		tagConfig + "runtime: {executor: pal}\n",
	} {
		res, err := algo.Resolve([]byte(file), []algo.Spec{p.spec()}, algo.Overrides{})
		if err == nil {
			_, err = algo.AdmitRun([]algo.Executor{local(), pal.Executor()}, res)
		}
		if !errors.Is(err, algo.ErrConfig) {
			t.Errorf("err %v, want ErrConfig", err)
		}
	}
}

const ppoTagConfig = `algo: ppo
env: mpe/simple_tag_v3?agent_id=true&max_cycles=10
seed: 2
steps: 3840
log_every: 640
multiagent:
  policies: [adversary, good]
  policy_mapping: {"adversary_*": adversary, agent_0: good}
ppo: {num_envs: 16, num_steps: 40, num_minibatches: 2, update_epochs: 2, hidden: [16]}
`

// TestDeterministic trains two PPO policies on simple_tag twice through
// algo.TrainRun (as herd train does): metrics.csv, without its wall-clock
// columns, and the checkpoint are the same bytes; the checkpoint holds
// both policies, loads back and evaluates.
func TestDeterministic(t *testing.T) {
	var csvs, models [2][]byte
	for i := range 2 {
		res, err := algo.Resolve([]byte(ppoTagConfig), []algo.Spec{ppo.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		res.Header.Out = t.TempDir()
		sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Dir: algo.DirForce, EvalEpisodes: 2,
			Executors: []algo.Executor{local()}})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Steps != 3840 || sum.Policies["policy/good/episodes"] == 0 || sum.Policies["policy/adversary/episodes"] != 3*sum.Policies["policy/good/episodes"] {
			t.Fatalf("summary steps %d, policies %v", sum.Steps, sum.Policies)
		}
		b, err := os.ReadFile(filepath.Join(res.Header.Out, "metrics.csv"))
		if err != nil {
			t.Fatal(err)
		}
		csvs[i] = withoutWallClock(t, b)
		if models[i], err = os.ReadFile(filepath.Join(res.Header.Out, algo.ModelFile)); err != nil {
			t.Fatal(err)
		}
		p, err := algo.LoadPolicies(filepath.Join(res.Header.Out, algo.ModelFile), res)
		if err != nil {
			t.Fatal(err)
		}
		// simple_tag is competitive: summary.json has each team's return.
		ar, err := algo.EvaluateAgents(context.Background(), p, env.Maker{}, res.Header.Env, 2, res.Header.Seed)
		if err != nil || len(ar.Team) != 2 {
			t.Fatalf("evaluate the loaded policies: %v %v", ar, err)
		}
		for i, n := range ar.TeamNames {
			m, _ := algo.MeanStd(ar.TeamColumn(i))
			if got := sum.EvalTeams[n].ReturnMean; got != m {
				t.Errorf("loaded policies: team %s returns %v, the trained ones %v", n, m, got)
			}
		}
	}
	if !bytes.Equal(csvs[0], csvs[1]) {
		t.Errorf("metrics.csv differs between two runs of one seed:\n%s\n%s", csvs[0], csvs[1])
	}
	if !bytes.Equal(models[0], models[1]) {
		t.Error("model.safetensors differs between two runs of one seed")
	}
	if !bytes.Contains(csvs[0], []byte("policy/good/losses/value_loss")) {
		t.Error("metrics.csv has no per-policy loss column")
	}
}

// withoutWallClock drops the wall_seconds and sps columns.
func withoutWallClock(t *testing.T, b []byte) []byte {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w := csv.NewWriter(&out)
	for _, r := range recs {
		w.Write(slices.Delete(slices.Clone(r), 1, 3))
	}
	w.Flush()
	return out.Bytes()
}

// TestDQNPolicies: an off-policy algorithm is several policies too, and
// a plan-only algorithm is refused.
func TestDQNPolicies(t *testing.T) {
	file := strings.NewReplacer("algo: ppo", "algo: dqn", "ppo: {num_envs: 16, num_steps: 40, num_minibatches: 2, update_epochs: 2, hidden: [16]}",
		"dqn: {num_envs: 8, learning_starts: 200, buffer_size: 2000, batch_size: 32, net_arch: [16]}").Replace(ppoTagConfig)
	res, err := algo.Resolve([]byte(file), []algo.Spec{dqn.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true,
		Executors: []algo.Executor{local()}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 3840 || sum.Policies["policy/adversary/losses/td_loss"] == 0 {
		t.Fatalf("steps %d, policies %v", sum.Steps, sum.Policies)
	}
}

const twinConfig = `algo: ppo
env: mpe/simple_tag_v3?agent_id=true&max_cycles=10
seed: 4
steps: 3840
log_every: 640
multiagent:
  policies: [adversary, good]
  policy_mapping: {"adversary_*": adversary, agent_0: good}
  algos: {good: dqn}
ppo: {num_envs: 16, num_steps: 40, num_minibatches: 2, update_epochs: 2, hidden: [16]}
dqn: {num_envs: 16, learning_starts: 100, buffer_size: 1000, batch_size: 16, net_arch: [16], train_frequency: 2}
`

// TestTwinPPODQN is RLlib Flow's twin trainer as a config: PPO for the
// adversaries, DQN for the runner, in one run. Each policy's columns are
// its own algorithm's, the run is deterministic, config.yaml keeps both
// sections and the checkpoint loads back with both algorithms.
func TestTwinPPODQN(t *testing.T) {
	var csvs [2][]byte
	for i := range 2 {
		res, err := algo.Resolve([]byte(twinConfig), []algo.Spec{ppo.Spec(), dqn.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		res.Header.Out = t.TempDir()
		sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Dir: algo.DirForce,
			Executors: []algo.Executor{local()}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sum.Policies["policy/good/losses/td_loss"]; !ok || sum.Policies["policy/adversary/losses/value_loss"] == 0 {
			t.Fatalf("policies %v: want DQN's td_loss for good, PPO's value_loss for adversary", sum.Policies)
		}
		b, err := os.ReadFile(filepath.Join(res.Header.Out, "metrics.csv"))
		if err != nil {
			t.Fatal(err)
		}
		csvs[i] = withoutWallClock(t, b)
		cfgFile, err := os.ReadFile(filepath.Join(res.Header.Out, algo.ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		again, err := algo.Resolve(cfgFile, []algo.Spec{ppo.Spec(), dqn.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatalf("config.yaml does not resolve: %v\n%s", err, cfgFile)
		}
		p, err := algo.LoadPolicies(filepath.Join(res.Header.Out, algo.ModelFile), again)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := algo.EvaluateAgents(context.Background(), p, env.Maker{}, res.Header.Env, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(csvs[0], csvs[1]) {
		t.Error("metrics.csv differs between two runs of one seed")
	}
	for _, c := range []struct{ from, to, want string }{
		{"algos: {good: dqn}", "algos: {good: sac2}", "unknown algorithm"},
		{"algos: {good: dqn}", "algos: {nobody: dqn}", "not in multiagent.policies"},
		{"dqn: {num_envs: 16,", "dqn: {num_envs: 4,", "must equal"},
	} {
		file := strings.Replace(twinConfig, c.from, c.to, 1)
		res, err := algo.Resolve([]byte(file), []algo.Spec{ppo.Spec(), dqn.Spec()}, algo.Overrides{})
		if err == nil {
			_, err = Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard(), Others: res.Others}, res.Spec, res.Config)
		}
		if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrConfig containing %q", c.to, err, c.want)
		}
	}
	noSection := strings.Replace(twinConfig, "dqn: {num_envs: 16, learning_starts: 100, buffer_size: 1000, batch_size: 16, net_arch: [16], train_frequency: 2}\n", "", 1)
	if _, err := algo.Resolve([]byte(noSection), []algo.Spec{ppo.Spec(), dqn.Spec()}, algo.Overrides{}); !errors.Is(err, algo.ErrConfig) {
		t.Errorf("no dqn section: err %v, want ErrConfig", err)
	}
}

// local is the local executor as package run wires it for a multiagent
// section (run imports this package, so its tests cannot import run).
func local() algo.Executor {
	return algo.Executor{Name: algo.LocalExecutor, Policies: true,
		Needs: func(algo.Header) []algo.Need { return []algo.Need{{Caps: algo.CanAgentRows}} }, Train: Train}
}
