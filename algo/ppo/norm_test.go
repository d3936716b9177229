package ppo

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"herd/algo"
	"herd/nn"
)

// TestNormLearn: with norm_obs, norm_reward and anneal_clip, each Learn
// clips at clip_coef·(1 − (k−1)/I) in update k of I (rl-zoo's lin_0.2),
// folds the segment's observations into obs_rms and its returns into
// ret_rms after the update (the update itself saw the statistics the
// segment was gathered with), and its learner state (with the running
// returns) restores into a fresh learner.
func TestNormLearn(t *testing.T) {
	sp := cartPoleSpaces(t)
	h := algo.DefaultHeader()
	h.Env, h.Steps = "CartPole-v1", 64*4
	cfg := DefaultConfig()
	cfg.NumEnvs, cfg.NumSteps, cfg.NumMinibatches, cfg.UpdateEpochs = 4, 16, 2, 2
	cfg.NormObs, cfg.NormReward, cfg.AnnealClip = true, true, true
	if err := cfg.Validate(h); err != nil {
		t.Fatal(err)
	}
	l, err := newLearner(h, &cfg, sp)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for k := 1; k <= 3; k++ {
		seg := segment(uint64(20+k), uint64(k-1))
		obs0 := paramNamed(l.Agent.Params(), "obs_rms").Value[0]
		if _, err := l.Learn(context.Background(), seg); err != nil {
			t.Fatal(err)
		}
		if want := 0.2 * (1 - float64(k-1)/4); math.Abs(float64(l.loss.eps)-want) > 1e-6 {
			t.Fatalf("update %d: clip %v, want %v", k, l.loss.eps, want)
		}
		if got := paramNamed(l.Agent.Params(), "obs_rms").Value[0]; math.Abs(float64(got-obs0)-64) > 1e-2 {
			t.Fatalf("update %d: obs_rms count %v → %v, want +64", k, obs0, got)
		}
	}
	st, err := l.MarshalLearnerState()
	if err != nil {
		t.Fatal(err)
	}
	m, err := newLearner(h, &cfg, sp)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.UnmarshalLearnerState(st); err != nil {
		t.Fatal(err)
	}
	if st2, _ := m.MarshalLearnerState(); string(st2) != string(st) {
		t.Fatal("the learner state did not survive a round trip")
	}
	if err := m.UnmarshalLearnerState(st[:len(st)-1]); !errors.Is(err, algo.ErrCheckpoint) {
		t.Fatalf("a truncated state: %v", err)
	}
}

func paramNamed(ps []*nn.Param, name string) *nn.Param {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	panic("no parameter " + name)
}

// TestRewardNormValueLoss: with norm_reward the critic's targets are the
// returns divided by the scale σ: dL/dv = c_vf·(v − R/σ)/B.
func TestRewardNormValueLoss(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NormReward, cfg.ClipVLoss, cfg.VFCoef = true, false, 0.7
	a, err := newAgentFor(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	paramNamed(a.Params(), "ret_rms").Value[2] = 4
	mb := newMinibatch(4, 1)
	mb.resize(2)
	copy(mb.returns, []float32{6, -2})
	l := newLosses(&cfg, mb)
	l.vn = a.RNorm
	d := make([]float32, 2)
	l.valueLoss(d, []float32{1, 1})
	for i, want := range []float64{0.7 * (1 - 3) / 2, 0.7 * (1 + 1) / 2} {
		if math.Abs(float64(d[i])-want) > 1e-5 {
			t.Fatalf("dL/dv %v, want %v", d, want)
		}
	}
}

// TestNormConfigErrors: the normalizations refuse what they cannot do.
func TestNormConfigErrors(t *testing.T) {
	h := algo.DefaultHeader()
	h.Env = "CartPole-v1"
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.NormReward, c.ValueNorm = true, true }, "choose one"},
		{func(c *Config) { c.NormObs, c.Encoder = true, "minatar" }, "norm_obs takes encoder mlp"},
		{func(c *Config) { c.Recurrent = RecurrentConfig{Type: "rnn"} }, `"lstm", "gru"`},
		{func(c *Config) { c.Recurrent = RecurrentConfig{Type: "gru", After: []int{0}} }, "after widths"},
		{func(c *Config) { c.Recurrent = RecurrentConfig{After: []int{4}} }, "without recurrent.type"},
	} {
		c := DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(h); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", c.Recurrent, err, tc.want)
		}
	}
	c := DefaultConfig()
	c.NormObs = true
	if lack, _ := c.Lacks(); !lack.Has(algo.CanDataParallel) {
		t.Error("norm_obs does not lack data-parallel learners")
	}
}
