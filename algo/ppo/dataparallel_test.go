package ppo

import (
	"context"
	"math"
	"slices"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
)

var (
	_ algo.DataParallel = (*learner)(nil)
	_ algo.Minibatcher  = (*Config)(nil)
)

// oneReducer is the Reducer of a single learner, through the same
// AverageGrads the data-parallel reducers use.
type oneReducer struct{ tmp *algo.Grad }

func (r *oneReducer) Learners() int { return 1 }

func (r *oneReducer) AverageGrad(_ context.Context, g *algo.Grad) error {
	if err := algo.AverageGrads(r.tmp, []*algo.Grad{g}); err != nil {
		return err
	}
	for i := range g.Parts {
		copy(g.Parts[i], r.tmp.Parts[i])
	}
	return nil
}

func (r *oneReducer) Sum(_ context.Context, x []float64) error {
	for i := range x {
		x[i] = 0 + x[i]
	}
	return nil
}

func cartPoleSpaces(t *testing.T) algo.Spaces {
	t.Helper()
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return algo.SpacesOf(e)
}

// TestDataParallelOneIsLearn: with a reducer of one learner, Learn (the
// union advantage statistics, the gradient through AverageGrads, the
// reduced KL stop) is the plain Learn bit for bit, over several updates
// with annealing, norm_adv and target_kl.
func TestDataParallelOneIsLearn(t *testing.T) {
	sp := cartPoleSpaces(t)
	h := algo.DefaultHeader()
	h.Env, h.Steps = "CartPole-v1", 64*10
	cfg := DefaultConfig()
	cfg.NumEnvs, cfg.NumSteps, cfg.NumMinibatches, cfg.UpdateEpochs, cfg.TargetKL = 4, 16, 4, 3, 0.002
	mk := func() *learner {
		l, err := newLearner(h, &cfg, sp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	plain, dp := mk(), mk()
	if err := dp.SetReducer(&oneReducer{tmp: dp.NewGrad()}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		seg := segment(uint64(10+i), uint64(i))
		for _, l := range []*learner{plain, dp} {
			if _, err := l.Learn(context.Background(), seg); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, p := range plain.Agent.Params() {
		if !slices.Equal(p.Value, dp.Agent.Params()[i].Value) {
			t.Fatalf("parameter %s differs", p.Name)
		}
	}
}

// gradTol bounds ‖avg − union‖∞ / ‖union‖∞ in TestDataParallelGradIsUnionGrad.
// The two are the same sums in another order: the union's weight gradient
// adds 2b rows' products in one accumulation, the average adds two b-row
// accumulations and halves the sum (an exact scaling); the advantage
// statistics are float64 sums in another order. float32 rounding of sums
// of 32 terms of mixed sign stays far below 1e-5 of the largest entry.
const gradTol = 1e-5

// TestDataParallelGradIsUnionGrad: two learners' gradients on their rows of
// one minibatch, each normalising advantages by the union's statistics,
// average (AverageGrads, learner-id order) to the single learner's
// gradient on the union minibatch.
func TestDataParallelGradIsUnionGrad(t *testing.T) {
	sp := cartPoleSpaces(t)
	h := algo.DefaultHeader()
	h.Env, h.Steps = "CartPole-v1", 64*10
	cfg := DefaultConfig()
	cfg.NumEnvs, cfg.NumSteps = 4, 16
	l, err := newLearner(h, &cfg, sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	seg := segment(3, 0)
	if _, err := l.Begin(context.Background(), seg); err != nil {
		t.Fatal(err)
	}
	const b = 16
	rows := rng.New(1, "test/rows", 0).Perm(seg.T * seg.N)[:2*b]
	grad := func(inds []int, union bool, mean, std float64) *algo.Grad {
		mb := newMinibatch(l.Agent.ObsDim, l.Agent.ActDim)
		mb.resize(len(inds))
		mb.gather(seg, l.Adv, l.Returns, inds)
		mb.union, mb.unionMean, mb.unionStd = union, mean, std
		l.Agent.Reserve(len(inds))
		update(l.Agent, newLosses(&cfg, mb), mb)
		g := l.NewGrad()
		if err := l.GradTo(g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	want := grad(rows, false, 0, 0)
	var mean, ss float64
	for _, i := range rows {
		mean += float64(l.Adv[i])
	}
	mean /= 2 * b
	for _, i := range rows {
		ss += (float64(l.Adv[i]) - mean) * (float64(l.Adv[i]) - mean)
	}
	std := math.Sqrt(ss / (2*b - 1))
	g0, g1 := grad(rows[:b], true, mean, std), grad(rows[b:], true, mean, std)
	avg := l.NewGrad()
	if err := algo.AverageGrads(avg, []*algo.Grad{g0, g1}); err != nil {
		t.Fatal(err)
	}
	var scale, diff float64
	for i := range want.Parts {
		for j, w := range want.Parts[i] {
			scale = max(scale, math.Abs(float64(w)))
			diff = max(diff, math.Abs(float64(w-avg.Parts[i][j])))
		}
	}
	t.Logf("‖avg − union‖∞ = %g, ‖union‖∞ = %g", diff, scale)
	if scale == 0 || diff > gradTol*scale {
		t.Fatalf("the learners' average is %g from the union gradient (largest entry %g)", diff, scale)
	}
	// Not the same gradient by accident: each share alone is far from it.
	var d0 float64
	for i := range want.Parts {
		for j, w := range want.Parts[i] {
			d0 = max(d0, math.Abs(float64(w-g0.Parts[i][j])))
		}
	}
	if d0 < 100*gradTol*scale {
		t.Fatalf("learner 0's share alone is only %g from the union gradient: the test cannot tell", d0)
	}
}
