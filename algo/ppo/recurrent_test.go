package ppo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
	"herd/rollout"
	"herd/sample"
)

// recurrentVariants are the recurrent networks the tests run: an LSTM
// after an encoder (ppo_atari_lstm's), a GRU, and an LSTM on normalized
// observations with a layer after it and the critic scaled by the reward
// normalization (rl-zoo's RecurrentPPO).
var recurrentVariants = []struct {
	name string
	mod  func(*Config)
}{
	{"lstm", func(*Config) {}},
	{"gru", func(c *Config) { c.Recurrent.Type = "gru" }},
	{"lstm-after-norm", func(c *Config) {
		c.Hidden, c.Recurrent.After, c.NormObs, c.NormReward = nil, []int{4}, true, true
	}},
}

// setStats gives the normalization statistics among params values away
// from their start (obs_rms: mean 0.1·j, variance 0.5 + j; ret_rms:
// variance 9), so that a test sees them used.
func setStats(params []*nn.Param) {
	for _, p := range params {
		switch p.Name {
		case "obs_rms":
			d := (len(p.Value) - 1) / 2
			for j := range d {
				p.Value[1+j], p.Value[1+d+j] = 0.1*float32(j), 0.5+float32(j)
			}
		case "ret_rms":
			p.Value[2] = 9
		}
	}
}

// recurrentSetup collects two segments of T steps of n CartPoleNoVel envs
// with a small PPO-LSTM policy changed by mod (acting one step at a time,
// the state per env carried by the policy and zeroed at each episode's
// end), and returns them with a learner's agent holding the same weights.
func recurrentSetup(t *testing.T, T, n int, mod func(*Config)) (*Config, *onpolicy.Agent, []*sample.Segment) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NumEnvs, cfg.NumSteps, cfg.NumMinibatches = n, T, 1
	cfg.Hidden, cfg.Recurrent = []int{6}, RecurrentConfig{Type: "lstm", Hidden: 5}
	cfg.OrthoInit, cfg.ClipVLoss, cfg.EntCoef = false, false, 0.01
	mod(&cfg)
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Steps, h.Seed = "ppo", "CartPoleNoVel-v1", int64(T*n), 3
	if err := cfg.Validate(h); err != nil {
		t.Fatal(err)
	}
	v, err := env.MakeVector(h.Env, n, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	sp := algo.SpacesOf(v)
	pol, err := onpolicy.NewPolicy(sp, cfg.agentConfig(), rng.New(h.Seed, "ppo/init", 0))
	if err != nil {
		t.Fatal(err)
	}
	sampler, err := onpolicy.NewSampler(sp, rand.New(rng.Source(h.Seed, "ppo/actor", 0)))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := onpolicy.NewAgent(sp.Obs, sp.Act, cfg.agentConfig(), rng.New(h.Seed, "ppo/init", 0))
	if err != nil {
		t.Fatal(err)
	}
	setStats(pol.Params())
	setStats(agent.Params())
	w := rollout.NewSegments(0, v, rollout.NewInline(pol, sampler), cfg.Gamma)
	if err := w.Reset(11); err != nil {
		t.Fatal(err)
	}
	var segs []*sample.Segment
	for range 2 {
		seg := sample.NewSegment(T, n, agent.ObsDim, agent.ActDim)
		if err := w.Collect(seg); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, seg)
	}
	return &cfg, agent, segs
}

// TestRecurrentReplayMatchesActing pins the hidden state's path: the
// learner, re-running each env's sequence from the state stored at the
// segment's start and resetting it where an episode ended, computes the
// log-probabilities and values the acting policy computed one step at a
// time. The first segment starts from zero states; the second from the
// states the first left, with episodes ending inside both.
func TestRecurrentReplayMatchesActing(t *testing.T) {
	for _, v := range recurrentVariants {
		t.Run(v.name, func(t *testing.T) { testReplayMatchesActing(t, v.mod) })
	}
}

func testReplayMatchesActing(t *testing.T, mod func(*Config)) {
	const T, n = 40, 3
	_, agent, segs := recurrentSetup(t, T, n, mod)
	scale := float32(1) // the critic's outputs are values / scale
	if agent.RNorm != nil {
		scale = agent.RNorm.Scale()
	}
	for k, seg := range segs {
		dones := 0
		for _, d := range seg.Dones {
			dones += int(d)
		}
		nonzero := false
		for _, x := range seg.State {
			nonzero = nonzero || x != 0
		}
		if dones == 0 || (k == 1) != nonzero || len(seg.State) != n*agent.StateDim() {
			t.Fatalf("segment %d: %d dones, state %d values (nonzero %v): the test needs episode ends and a nonzero second state", k, dones, len(seg.State), nonzero)
		}
		var s sequences
		inds := s.gather(seg, []int{0, 1, 2})
		obs := make([]float32, T*n*agent.ObsDim)
		acts := make([]float32, T*n)
		for r, i := range inds {
			copy(obs[r*agent.ObsDim:(r+1)*agent.ObsDim], seg.Obs[i*agent.ObsDim:(i+1)*agent.ObsDim])
			acts[r] = seg.Actions[i]
		}
		lp, ent, val := make([]float32, T*n), make([]float32, T*n), make([]float32, T*n)
		agent.SetSequences(T, n, s.state, s.starts)
		agent.Evaluate(lp, ent, val, obs, acts, T*n)
		for r, i := range inds {
			if math.Abs(float64(lp[r]-seg.LogProbs[i])) > 1e-5 || math.Abs(float64(val[r]*scale-seg.Values[i])) > 1e-5 {
				t.Fatalf("segment %d row %d: learner log π %v, V %v; acting %v, %v", k, i, lp[r], val[r], seg.LogProbs[i], seg.Values[i])
			}
		}
		// Without the resets the replay departs from the acting: the
		// check above can tell.
		agent.SetSequences(T, n, s.state, nil)
		agent.Evaluate(lp, ent, val, obs, acts, T*n)
		differ := false
		for r, i := range inds {
			differ = differ || math.Abs(float64(val[r]*scale-seg.Values[i])) > 1e-5
		}
		if !differ {
			t.Fatalf("segment %d: values without resets equal the acting ones", k)
		}
	}
}

// TestRecurrentLossGradient checks PPO-LSTM's gradient over a segment —
// the clipped surrogate, entropy and value terms back-propagated through
// the heads, T steps of both LSTMs (cut at episode ends) and the encoders
// — against central finite differences of the same loss.
func TestRecurrentLossGradient(t *testing.T) {
	for _, v := range recurrentVariants {
		t.Run(v.name, func(t *testing.T) { testRecurrentLossGradient(t, v.mod) })
	}
}

func testRecurrentLossGradient(t *testing.T, mod func(*Config)) {
	const T, n = 24, 2
	cfg, agent, segs := recurrentSetup(t, T, n, mod)
	seg := segs[1]
	l := &learner{cfg: cfg}
	l.Learner = &onpolicy.Learner{Agent: agent}
	adv, ret := make([]float32, T*n), make([]float32, T*n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range adv {
		adv[i], ret[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	var s sequences
	inds := s.gather(seg, []int{1, 0})
	mb := newMinibatch(agent.ObsDim, agent.ActDim)
	mb.resize(T * n)
	mb.gather(seg, adv, ret, inds)
	loss := newLosses(cfg, mb)
	lossAt := func() float64 {
		lp, ent, val := make([]float32, T*n), make([]float32, T*n), make([]float32, T*n)
		agent.SetSequences(T, n, s.state, s.starts)
		agent.Evaluate(lp, ent, val, mb.obs, mb.actions, T*n)
		d := make([]float32, T*n)
		loss.policyLoss(d, make([]float32, T*n), lp, ent)
		loss.valueLoss(d, val)
		return loss.pgLoss - float64(cfg.EntCoef)*loss.entropy + float64(cfg.VFCoef)*loss.vLoss
	}
	agent.SetSequences(T, n, s.state, s.starts)
	update(agent, loss, mb)
	checked := 0
	for _, p := range agent.Params() {
		if p.Name == "obs_rms" || p.Name == "ret_rms" {
			continue // statistics, which no gradient moves
		}
		// Fixed entries, and those of largest gradient, where float32
		// differences have the most signal.
		best := []int{0, len(p.Grad) / 2, len(p.Grad) - 1}
		for i := range p.Grad {
			if len(best) < 6 {
				best = append(best, i)
				continue
			}
			for k, j := range best[3:] {
				k += 3
				if math.Abs(float64(p.Grad[i])) > math.Abs(float64(p.Grad[j])) {
					best[k] = i
					break
				}
			}
		}
		for _, i := range best {
			g := float64(p.Grad[i])
			const eps = 1e-2
			x := p.Value[i]
			p.Value[i] = x + eps
			up := lossAt()
			p.Value[i] = x - eps
			down := lossAt()
			p.Value[i] = x
			fd := (up - down) / (2 * eps)
			if math.Abs(fd-g) > 0.03*math.Abs(g)+2e-4 {
				t.Errorf("%s[%d]: gradient %.6g, finite difference %.6g", p.Name, i, g, fd)
			}
			if math.Abs(g) > 1e-3 {
				checked++
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d gradient entries checked", checked)
	}
}

// TestRecurrentEvalResets: the deterministic policy (herd eval) carries
// its state from one Act to the next and starts again from the zero state
// after ResetEnv, which algo.Evaluate calls before each episode.
func TestRecurrentEvalResets(t *testing.T) {
	_, agent, segs := recurrentSetup(t, 8, 1, recurrentVariants[0].mod)
	var p algo.Policy = agent
	r, ok := p.(algo.EnvResetter)
	if !ok {
		t.Fatal("a recurrent agent is not an algo.EnvResetter")
	}
	obs := segs[0].Obs[:agent.ObsDim]
	first := agent.StateDim()
	dst := make([]float32, 1)
	agent.Act(dst, obs)
	s1 := append([]float32(nil), agent.ActState()...)
	agent.Act(dst, obs)
	s2 := append([]float32(nil), agent.ActState()...)
	r.ResetEnv(0)
	agent.Act(dst, obs)
	s3 := agent.ActState()
	if first == 0 || fmt.Sprint(s1) == fmt.Sprint(s2) || fmt.Sprint(s1) != fmt.Sprint(s3) {
		t.Fatalf("states after Act, Act, ResetEnv+Act: %v, %v, %v", s1, s2, s3)
	}
}
