package impala

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/flow"
	"herd/internal/rng"
	"herd/nn"
	"herd/rollout"
	"herd/sample"
)

// recurrentRig is a small IMPALA-LSTM on CartPoleNoVel-v1: its pieces,
// and segments its policy made acting one step at a time through the
// flow workers' policy (rollout.Slots: one sampler per env), which keeps
// each env's state and is told where an episode ended.
type recurrentRig struct {
	h      algo.Header
	cfg    *Config
	pieces *algo.Pieces
	segs   []*sample.Segment
}

// newRecurrentRig collects nSegs segments of T steps of n envs with the
// initial weights, changed by mod where not nil (the same change a test
// makes to its learners).
func newRecurrentRig(t *testing.T, T, n, nSegs int, mod func([]*nn.Param)) *recurrentRig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NumEnvs, cfg.NumSteps, cfg.EntCoef = n, T, 0.01
	cfg.Hidden, cfg.OrthoInit = []int{6}, false
	cfg.Recurrent = onpolicy.RecurrentConfig{Type: "lstm", Hidden: 5, After: []int{4}}
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Steps, h.Seed = "impala", "CartPoleNoVel-v1", int64(100*T*n), 3
	v, err := env.MakeVector(h.Env, n, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	pc, err := Pieces(h, &cfg, algo.SpacesOf(v))
	if err != nil {
		t.Fatal(err)
	}
	net, err := pc.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(net.(*onpolicy.Policy).Params())
	}
	var samplers []algo.Sampler
	for j := range n {
		s, err := pc.NewSampler(1, rand.New(rng.Source(h.Seed, "test/actor", j)))
		if err != nil {
			t.Fatal(err)
		}
		samplers = append(samplers, s)
	}
	w := rollout.NewSegments(0, v, rollout.NewSlots(net, samplers), cfg.Gamma)
	if err := w.Reset(11); err != nil {
		t.Fatal(err)
	}
	rig := &recurrentRig{h: h, cfg: &cfg, pieces: pc}
	for range nSegs {
		seg := sample.NewSegment(T, n, v.ObservationSpace().Dim(), v.ActionSpace().Dim())
		if err := w.Collect(seg); err != nil {
			t.Fatal(err)
		}
		rig.segs = append(rig.segs, seg)
	}
	return rig
}

// learner returns a learner at the initial weights, changed by mod.
func (r *recurrentRig) learner(t *testing.T, mod func([]*nn.Param)) *learner {
	t.Helper()
	sl, err := r.pieces.NewSegmentLearner()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sl.Close() })
	l := sl.(*learner)
	if mod != nil {
		mod(l.Agent.Params())
	}
	return l
}

// statOf returns the scalar name of stats.
func statOf(t *testing.T, stats []algo.Stat, name string) float64 {
	t.Helper()
	for _, s := range stats {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("no %s among %v", name, stats)
	return 0
}

// TestRecurrentVTraceOnRerun pins what V-trace reads in a recurrent
// learner: log ρ = log π − log μ with log π from the learner's re-run of
// each env's sequence (from the state the actor recorded at the
// segment's start, zeroed after every done) and log μ the behaviour
// log-probabilities the actor recorded; V(x_s) from the re-run critic and
// V(x_T) from the state the segment's last step left (zero where that
// step ended an episode); then VTrace on them, as the feed-forward
// learner calls it. At the actor's weights the re-run equals the acting,
// so each log ρ is 0 (to rounding); with log μ raised by log 2 on every
// other row, those rows weigh ρ = ½ (ρ̄ = 1 would cut a sign error's 2
// to 1). The second segment starts from the states the first left, and
// episodes end inside both.
func TestRecurrentVTraceOnRerun(t *testing.T) {
	const T, n = 40, 3
	rig := newRecurrentRig(t, T, n, 2, nil)
	for k, seg := range rig.segs {
		dones, nonzero := 0, false
		for _, d := range seg.Dones {
			dones += int(d)
		}
		for _, x := range seg.State {
			nonzero = nonzero || x != 0
		}
		if dones == 0 || (k == 1) != nonzero {
			t.Fatalf("segment %d: %d dones, nonzero state %v: the test needs episode ends and a nonzero second state", k, dones, nonzero)
		}
		for _, shift := range []bool{false, true} {
			s := *seg
			s.LogProbs = append([]float32(nil), seg.LogProbs...)
			wantRho := 0.0
			for i := range s.LogProbs {
				if shift && i%2 == 1 {
					s.LogProbs[i] += float32(math.Ln2)
					wantRho += 0.5
				} else {
					wantRho++
				}
			}
			wantRho /= float64(T * n)
			l := rig.learner(t, nil)
			stats, err := l.Learn(context.Background(), &s)
			if err != nil {
				t.Fatal(err)
			}
			for i := range T * n {
				if d := l.logProb[i] - seg.LogProbs[i]; math.Abs(float64(d)) > 1e-5 {
					t.Fatalf("segment %d row %d: re-run log π %v, acting %v", k, i, l.logProb[i], seg.LogProbs[i])
				}
				if l.logRho[i] != l.logProb[i]-s.LogProbs[i] {
					t.Fatalf("segment %d row %d: log ρ %v, want log π − log μ = %v", k, i, l.logRho[i], l.logProb[i]-s.LogProbs[i])
				}
				if d := l.values[i] - seg.Values[i]; math.Abs(float64(d)) > 1e-5 {
					t.Fatalf("segment %d row %d: re-run V %v, acting %v", k, i, l.values[i], seg.Values[i])
				}
			}
			for e := range n {
				if d := l.boot[e] - seg.LastValues[e]; math.Abs(float64(d)) > 1e-5 {
					t.Fatalf("segment %d env %d: V(x_T) %v, acting %v", k, e, l.boot[e], seg.LastValues[e])
				}
			}
			vs, adv := make([]float32, T*n), make([]float32, T*n)
			VTrace(vs, adv, l.logRho, s.Rewards, l.values, s.Dones, l.boot, n, rig.cfg.Gamma, rig.cfg.RhoBar, rig.cfg.CBar, rig.cfg.Lambda)
			for i := range vs {
				if vs[i] != l.vs[i] || adv[i] != l.adv[i] {
					t.Fatalf("segment %d row %d: learner v %v, A %v; VTrace %v, %v", k, i, l.vs[i], l.adv[i], vs[i], adv[i])
				}
			}
			if got := statOf(t, stats, "losses/mean_rho"); math.Abs(got-wantRho) > 1e-5 {
				t.Errorf("segment %d (log μ shifted: %v): mean ρ %v, want %v", k, shift, got, wantRho)
			}
		}
	}
}

// TestRecurrentStateResets: where an episode ends the state goes back to
// zero, in the acting policy and in the learner's re-run. The acting
// side is pinned by TestRecurrentVTraceOnRerun (its segments come from
// flow's per-env policy, and a state carried over an episode's end there
// would part it from the learner's log π); here a learner re-running the
// same sequences with the state carried over the dones departs from the
// acting values, and a segment whose stored state is missing is refused.
func TestRecurrentStateResets(t *testing.T) {
	const T, n = 40, 3
	rig := newRecurrentRig(t, T, n, 1, nil)
	seg := rig.segs[0]
	l := rig.learner(t, nil)
	a := l.Agent
	lp, ent, val := make([]float32, T*n), make([]float32, T*n), make([]float32, T*n)
	a.SetSequences(T, n, seg.State, nil)
	a.Evaluate(lp, ent, val, seg.Obs, seg.Actions, T*n)
	differ := false
	for i := range val {
		differ = differ || math.Abs(float64(val[i]-seg.Values[i])) > 1e-5
	}
	if !differ {
		t.Fatal("values re-run without the resets equal the acting ones: the dones do not test the reset")
	}
	a.SetSequences(T, n, seg.State, onpolicy.EpisodeStarts(nil, seg))
	a.Evaluate(lp, ent, val, seg.Obs, seg.Actions, T*n)
	for i := range val {
		if math.Abs(float64(val[i]-seg.Values[i])) > 1e-5 {
			t.Fatalf("row %d: V %v with the resets, acting %v", i, val[i], seg.Values[i])
		}
	}
	bad := *seg
	bad.State = nil
	if _, err := l.Learn(context.Background(), &bad); err == nil || !strings.Contains(err.Error(), "state at the segment's start") {
		t.Errorf("a segment without states: %v", err)
	}
}

// memoryless makes each LSTM of params forget: no recurrent weights and
// a forget gate shut (its bias −1e4: σ = 0), so h_t depends on x_t alone.
func memoryless(params []*nn.Param) {
	for _, p := range params {
		switch {
		case strings.HasSuffix(p.Name, "lstm.weight_hh_l0"):
			clear(p.Value)
		case strings.HasSuffix(p.Name, "lstm.bias_ih_l0"):
			h := len(p.Value) / 4
			for i := h; i < 2*h; i++ { // PyTorch's gate order i, f, g, o
				p.Value[i] = -1e4
			}
		}
	}
}

// TestRecurrentMemorylessIsFeedForward: with a core that remembers
// nothing, the recurrent learner's step on a segment equals a reference
// feed-forward IMPALA step on its rows: log π, V(x_s) and V(x_T) of each
// row alone (sequences of one step from the zero state), log ρ against
// the recorded (here perturbed) log μ, VTrace over the segment, the same
// loss's gradient, clip and Adam step. Every parameter ends equal but the
// recurrent weights, whose gradient alone reads h_{t−1}.
func TestRecurrentMemorylessIsFeedForward(t *testing.T) {
	const T, n = 12, 3
	rig := newRecurrentRig(t, T, n, 2, memoryless)
	seg := rig.segs[1]
	r := rand.New(rand.NewPCG(5, 6))
	for i := range seg.LogProbs {
		seg.LogProbs[i] += float32(0.3 * r.NormFloat64()) // behaviour ≠ target: ρ ≠ 1, some cut at ρ̄
	}
	l := rig.learner(t, memoryless)
	stats, err := l.Learn(context.Background(), seg)
	if err != nil {
		t.Fatal(err)
	}

	ref := rig.learner(t, memoryless)
	cfg, a, B := rig.cfg, ref.Agent, T*n
	lp, ent, val, boot := make([]float32, B), make([]float32, B), make([]float32, B), make([]float32, n)
	a.SetSequences(1, B, make([]float32, B*a.StateDim()), nil)
	a.Evaluate(lp, ent, val, seg.Obs, seg.Actions, B)
	a.SetSequences(1, n, make([]float32, n*a.StateDim()), nil)
	a.Value(boot, seg.NextObs, n)
	logRho := make([]float32, B)
	var rhoSum float64
	for i := range logRho {
		logRho[i] = lp[i] - seg.LogProbs[i]
		rhoSum += math.Min(1, math.Exp(float64(logRho[i])))
	}
	ref.vs, ref.adv = make([]float32, B), make([]float32, B)
	VTrace(ref.vs, ref.adv, logRho, seg.Rewards, val, seg.Dones, boot, n, cfg.Gamma, cfg.RhoBar, cfg.CBar, cfg.Lambda)
	cut := 0
	for _, x := range logRho {
		if x > 0 {
			cut++
		}
	}
	if cut == 0 || cut == B {
		t.Fatalf("%d of %d rows have ρ > ρ̄: the test needs both", cut, B)
	}
	a.SetSequences(1, B, make([]float32, B*a.StateDim()), nil)
	a.Learn(seg.Obs, seg.Actions, B, ref.policy, ref.value)
	nn.ClipGradNorm(a.Params(), cfg.MaxGradNorm)
	ref.Opt.Step(a.Params())

	close := func(got, want float64) bool { return math.Abs(got-want) <= 1e-5*max(1, math.Abs(want)) }
	for name, want := range map[string]float64{"losses/mean_rho": rhoSum / float64(B), "losses/policy_loss": ref.pgLoss,
		"losses/value_loss": ref.vLoss, "losses/entropy": ref.entMean} {
		if got := statOf(t, stats, name); !close(got, want) {
			t.Errorf("%s %v, reference %v", name, got, want)
		}
	}
	for i, p := range l.Agent.Params() {
		if strings.HasSuffix(p.Name, "weight_hh_l0") {
			continue
		}
		q := a.Params()[i]
		for j := range p.Value {
			if !close(float64(p.Value[j]), float64(q.Value[j])) {
				t.Fatalf("%s[%d]: %v after the recurrent step, %v after the reference", p.Name, j, p.Value[j], q.Value[j])
			}
		}
	}
}

// TestRecurrentLossGradient checks the recurrent learner's gradient —
// the V-trace policy gradient, entropy and value terms with A and v held
// fixed, back-propagated through the heads, T steps of both LSTMs (cut
// at episode ends) and the encoders — against central finite
// differences of the same loss.
func TestRecurrentLossGradient(t *testing.T) {
	const T, n = 16, 2
	rig := newRecurrentRig(t, T, n, 2, nil)
	seg := rig.segs[1]
	l := rig.learner(t, nil)
	a, B := l.Agent, T*n
	r := rand.New(rand.NewPCG(1, 2))
	l.adv, l.vs = make([]float32, B), make([]float32, B)
	for i := range l.adv {
		l.adv[i], l.vs[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	starts := onpolicy.EpisodeStarts(nil, seg)
	lossAt := func() float64 {
		lp, ent, val := make([]float32, B), make([]float32, B), make([]float32, B)
		a.SetSequences(T, n, seg.State, starts)
		a.Evaluate(lp, ent, val, seg.Obs, seg.Actions, B)
		d := make([]float32, B)
		l.policy(d, make([]float32, B), lp, ent)
		l.value(d, val)
		return l.pgLoss - float64(l.cfg.EntCoef)*l.entMean + float64(l.cfg.VFCoef)*l.vLoss
	}
	a.SetSequences(T, n, seg.State, starts)
	a.Learn(seg.Obs, seg.Actions, B, l.policy, l.value)
	checked := 0
	for _, p := range a.Params() {
		grad := append([]float32(nil), p.Grad...)
		for _, i := range []int{0, len(p.Value) / 3, len(p.Value) / 2, len(p.Value) - 1} {
			x := float64(p.Value[i])
			const eps = 1e-2
			p.Value[i] = float32(x + eps)
			up := lossAt()
			p.Value[i] = float32(x - eps)
			down := lossAt()
			p.Value[i] = float32(x)
			want := (up - down) / (2 * eps)
			if math.Abs(float64(grad[i])-want) > 2e-3*max(1, math.Abs(want)) {
				t.Errorf("%s[%d]: gradient %v, central difference %v", p.Name, i, grad[i], want)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d entries", checked)
	}
}

// TestRecurrentSameBits: IMPALA-LSTM's plan (two in-process workers, two
// segments in flight each, learned in request order) trains to the same
// model bytes from the same seed, and to other bytes from another seed.
func TestRecurrentSameBits(t *testing.T) {
	run := func(seed int) []byte {
		file := fmt.Sprintf("algo: impala\nenv: CartPoleNoVel-v1\nseed: %d\nsteps: 1024\nruntime: {env_workers: 2}\n"+
			"impala: {num_envs: 4, num_steps: 16, hidden: [8], recurrent: {type: lstm, hidden: 8}}\n", seed)
		res, err := algo.Resolve([]byte(file), []algo.Spec{Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := flow.WithTrain(Spec()).Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Config)
		if err != nil {
			t.Fatal(err)
		}
		return learntest.ModelBytes(t, m)
	}
	a, b, c := run(5), run(5), run(6)
	if !bytes.Equal(a, b) {
		t.Error("two runs from seed 5 ended with different models")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 5 and 6 ended with the same model")
	}
}
