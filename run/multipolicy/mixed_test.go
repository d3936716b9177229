package multipolicy

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/algotest"
	"herd/algo/ppo"
	"herd/env"
)

const signalConfig = `algo: ppo
env: toy/signal_v0?targets=2&max_cycles=4
seed: 1
steps: 24000
log_every: 4000
multiagent:
  policies: [speaker, listener]
  policy_mapping: {speaker_0: speaker, listener_0: listener}
ppo: {num_envs: 32, num_steps: 16, num_minibatches: 2, update_epochs: 4, hidden: [32], learning_rate: 3.0e-3, ent_coef: 0.01}
`

// TestMixedActionSpaces: toy/signal_v0's speaker acts with Discrete(2)
// and its listener with Discrete(3) (or a Box of one value; or with Dict
// observations, which the rows hold flattened); each policy's
// network is sized to its own agents' action space, both learn the game
// (well above guessing, −1/3 per step, and above always passing, 0), and
// the checkpoint loads back and evaluates to the same returns.
func TestMixedActionSpaces(t *testing.T) {
	for _, c := range []struct {
		name, env string
		obs       int // a row's width
	}{
		{"discrete", "toy/signal_v0?targets=2&max_cycles=4", 3},
		{"box", "toy/signal_v0?targets=2&max_cycles=4&continuous_listener=true", 3},
		// Dict observations, flattened: the listener's {heard: Discrete(3),
		// time: Box(1)} is 4 values.
		{"dict", "toy/signal_v0?targets=2&max_cycles=4&dict_obs=true", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := strings.Replace(signalConfig, "toy/signal_v0?targets=2&max_cycles=4", c.env, 1)
			res, err := algo.Resolve([]byte(file), []algo.Spec{ppo.Spec()}, algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			res.Header.Out = t.TempDir()
			sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Dir: algo.DirForce, EvalEpisodes: 20,
				Executors: []algo.Executor{local()}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := algo.LoadPolicies(filepath.Join(res.Header.Out, algo.ModelFile), res)
			if err != nil {
				t.Fatal(err)
			}
			pe, err := env.MakeParallel(res.Header.Env)
			if err != nil {
				t.Fatal(err)
			}
			defer pe.Close()
			for k, agent := range []string{"speaker_0", "listener_0"} {
				sp, err := pe.ActionSpace(agent)
				if err != nil {
					t.Fatal(err)
				}
				a := p.ActAgent(make([]float32, sp.Dim()), make([]float32, c.obs), agent)
				if len(a) != sp.Dim() || !(sp.Contains(a) || c.name == "box") {
					t.Errorf("policy %d acts %v for %s, want an element of %v", k, a, agent, sp)
				}
			}
			ar, err := algo.EvaluateAgents(context.Background(), p, env.Maker{}, res.Header.Env, 20, res.Header.Seed)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := algo.MeanStd(ar.Team)
			if m != sum.EvalReturnMean {
				t.Errorf("loaded policies return %v, the trained ones %v", m, sum.EvalReturnMean)
			}
			// Each of 4 steps: +1 right, −1 wrong, 0 pass for the discrete
			// listener (best 2·3 = 6 for the team, guessing −8/3); 1 − |x − g|
			// for the Box (best 2·4 = 8, x = 0 always: 4).
			if want := map[string]float64{"discrete": 3, "box": 5.5, "dict": 3}[c.name]; m < want {
				t.Errorf("team return %.2f after training, want ≥ %v (summary %+v)", m, want, sum.Policies)
			}
		})
	}
}

// TestOnePolicyMixedSpacesRefused: agents with different action spaces
// cannot share one policy: a vector of every agent's rows, a run without
// a multiagent section and a mapping that gives both agents one policy
// are refused before training, naming the agents and their spaces.
func TestOnePolicyMixedSpacesRefused(t *testing.T) {
	_, err := env.MakeVector("toy/signal_v0", 4, env.Sync)
	if !errors.Is(err, env.ErrInvalidOption) || !strings.Contains(err.Error(), "speaker_0 and listener_0 have different action spaces, Discrete(4, start=0) and Discrete(5, start=0)") {
		t.Errorf("one vector for every agent: %v", err)
	}
	shared := strings.NewReplacer("[speaker, listener]", "[both]", "{speaker_0: speaker, listener_0: listener}", `{"*": both}`).Replace(signalConfig)
	res, err := algo.Resolve([]byte(shared), []algo.Spec{ppo.Spec()}, algo.Overrides{})
	if err == nil {
		_, err = Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config)
	}
	if want := "policy both acts for agents speaker_0 (action space Discrete(2, start=0)) and listener_0 (Discrete(3, start=0))"; !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("one policy for both: err %v, want ErrConfig containing %q", err, want)
	}
	none := signalConfig[:strings.Index(signalConfig, "multiagent:")] + signalConfig[strings.Index(signalConfig, "ppo:"):]
	res, err = algo.Resolve([]byte(none), []algo.Spec{ppo.Spec()}, algo.Overrides{})
	if err == nil {
		_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true})
	}
	if err == nil || !strings.Contains(err.Error(), "have different action spaces") {
		t.Errorf("no multiagent section: err %v, want a refusal naming the spaces", err)
	}
}

// TestResumeRestartsEnvs: toy/signal_v0, whose envs cannot save their
// state, checkpoints every policy's state without them; resumed twice, the
// run completes with every metrics.csv step once, each resume restarting
// the 16 envs (not the 32 agent rows) once.
func TestResumeRestartsEnvs(t *testing.T) {
	algotest.ResumeRestarts(t, func(out string) *algo.Resolved {
		file := strings.Replace(signalConfig, "steps: 24000\nlog_every: 4000\n", "steps: 6144\nlog_every: 512\ncheckpoint_every: 1000\nout: "+out+"\n", 1)
		res, err := algo.Resolve([]byte(file), []algo.Spec{ppo.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}, algo.RunOptions{Executors: []algo.Executor{local()}}, 16, [2]int64{1000, 3000})
}
