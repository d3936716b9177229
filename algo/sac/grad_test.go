package sac

import (
	"math"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
)

const batch = 6

// testLearner returns a learner with small networks and a minibatch drawn
// into l.mb, with α = 0.3.
func testLearner(t *testing.T) *Learner {
	t.Helper()
	cfg := NewConfig()
	cfg.BatchSize, cfg.NetArch = batch, []int{8}
	e, err := env.Make("Pendulum-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p, err := newPieces(algo.Header{Env: "Pendulum-v1", Seed: 1, Steps: 1000}, cfg, algo.SpacesOf(e))
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.newLearner()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rb, err := p.newReplay()
	if err != nil {
		t.Fatal(err)
	}
	r := rng.New(1, "test/sac", 0)
	tr := sample.NewTransitions(32, 3, 1)
	for i := range tr.Obs {
		tr.Obs[i], tr.NextObs[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	for i := range 32 {
		tr.Actions[i], tr.Rewards[i], tr.Discounts[i] = float32(2*r.Float64()-1), float32(r.NormFloat64()), float32(cfg.Gamma)
		if i%5 == 0 {
			tr.Dones[i] = 1
		}
	}
	if err := rb.Add(tr); err != nil {
		t.Fatal(err)
	}
	if err := rb.Sample(&l.mb, batch, 0, r); err != nil {
		t.Fatal(err)
	}
	l.alpha = 0.3
	return l
}

// TestActorLossGradient checks SAC's actor loss
//
//	L = mean_r α log π(ã_r|s_r) − min_i Q_i(s_r, ã_r),  ã = tanh(μ + σε)·scale + bias,
//
// with ε held fixed (the reparameterisation): dL/d(actor output), through
// the minimum critic's dQ/da and the tanh-Gaussian's log-probability,
// against central differences of a float64 reference.
func TestActorLossGradient(t *testing.T) {
	l := testLearner(t)
	loss := l.actorGrad()

	mb, h := &l.mb, l.head
	out := learntest.To64(l.actor.Forward(mb.Obs, batch))
	q1, q2 := learntest.NewMLP64(l.agent.QF1.Net), learntest.NewMLP64(l.agent.QF2.Net)
	obs := learntest.To64(mb.Obs)
	d := h.Dim
	ref := func() float64 {
		act := make([]float64, batch*d)
		logPi := make([]float64, batch)
		for r := range batch {
			for i := range d {
				mu, raw := out[r*2*d+i], out[r*2*d+d+i]
				ls := float64(h.LogStdMin) + 0.5*float64(h.LogStdMax-h.LogStdMin)*(math.Tanh(raw)+1)
				e := float64(l.noise[r*d+i])
				u := mu + math.Exp(ls)*e
				s := float64(h.Scale[i])
				act[r*d+i] = math.Tanh(u)*s + float64(h.Bias[i])
				logPi[r] += -0.5*e*e - ls - 0.5*math.Log(2*math.Pi) - math.Log(s*(1-math.Tanh(u)*math.Tanh(u))+1e-6)
			}
		}
		a1 := learntest.Critic64(q1, obs, act, 3, d, batch)
		a2 := learntest.Critic64(q2, obs, act, 3, d, batch)
		var sum float64
		for r := range batch {
			sum += l.alpha*logPi[r] - min(a1[r], a2[r])
		}
		return sum / batch
	}
	if e := math.Abs(ref() - loss); e > 1e-4*max(1, math.Abs(loss)) {
		t.Errorf("loss %v, reference %v", loss, ref())
	}
	learntest.CheckGrad(t, "dL/d(actor output)", l.dOut, learntest.NumGrad(out, ref))
}

// TestAlphaLossGradient checks the entropy-coefficient loss
// L(log α) = −α·mean(log π + H̄), α = exp(log α), with log π fixed.
func TestAlphaLossGradient(t *testing.T) {
	l := testLearner(t)
	l.actorGrad() // log π of a fresh sample
	l.logAlpha.Value[0] = -0.7
	loss := l.alphaGrad()
	x := []float64{float64(l.logAlpha.Value[0])}
	ref := func() float64 {
		var s float64
		for _, lp := range l.logPi {
			s += float64(lp) + l.targetEntropy
		}
		return -math.Exp(x[0]) * s / batch
	}
	if e := math.Abs(ref() - loss); e > 1e-6*max(1, math.Abs(loss)) {
		t.Errorf("loss %v, reference %v", loss, ref())
	}
	learntest.CheckGrad(t, "dL/dlog α", l.logAlpha.Grad, learntest.NumGrad(x, ref))
}

// TestCriticTarget checks the soft target the critics regress onto,
//
//	y = r + γ^m (1 − done)(min_i Q'_i(s', ã') − α log π(ã'|s')),
//
// against a float64 reference from the same sample ã' (the critic loss's
// gradient is checked in offpolicy.TestTwinFitGradient).
func TestCriticTarget(t *testing.T) {
	l := testLearner(t)
	l.criticTarget()
	mb := &l.mb
	q1 := learntest.Critic64(learntest.NewMLP64(l.qf1Target.Net), learntest.To64(mb.NextObs), learntest.To64(l.nextAct), 3, 1, batch)
	q2 := learntest.Critic64(learntest.NewMLP64(l.qf2Target.Net), learntest.To64(mb.NextObs), learntest.To64(l.nextAct), 3, 1, batch)
	dones := 0
	for r := range batch {
		want := float64(mb.Rewards[r]) + float64(mb.Discounts[r])*(1-float64(mb.Dones[r]))*
			(min(q1[r], q2[r])-l.alpha*float64(l.nextLogPi[r]))
		if math.Abs(float64(l.nextQ[r])-want) > 1e-5*max(1, math.Abs(want)) {
			t.Errorf("row %d: y = %v, reference %v", r, l.nextQ[r], want)
		}
		dones += int(mb.Dones[r])
	}
	if dones == 0 || dones == batch {
		t.Logf("minibatch has %d terminal rows of %d", dones, batch)
	}
}
