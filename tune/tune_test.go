package tune

import (
	"errors"
	"math"
	"testing"
)

func TestFitRecoversAmdahl(t *testing.T) {
	want := Amdahl{F1: 1200, S: 0.3}
	var pts []Point
	for x := 1; x <= 6; x++ {
		pts = append(pts, Point{X: x, Y: want.At(float64(x))})
	}
	got, err := Fit(pts)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.F1-want.F1)/want.F1 > 1e-4 || math.Abs(got.S-want.S) > 1e-4 {
		t.Fatalf("fit %+v, want %+v", got, want)
	}
	// A single point pins F1 and leaves S at the boundary search's choice,
	// and it must still reproduce the point.
	one, err := Fit(pts[:1])
	if err != nil || math.Abs(one.At(1)-pts[0].Y) > 1e-6*pts[0].Y {
		t.Fatalf("one-point fit %+v, %v", one, err)
	}
}

func TestFitRejectsBadPoints(t *testing.T) {
	for _, pts := range [][]Point{nil, {{X: 0, Y: 1}}, {{X: 1, Y: math.NaN()}}, {{X: 1, Y: -1}}, {{X: 2, Y: math.Inf(1)}}} {
		if _, err := Fit(pts); !errors.Is(err, ErrInput) {
			t.Errorf("%v: %v, want ErrInput", pts, err)
		}
	}
}

// TestChooseBalances checks eq. 5's balance on curves whose answer is
// known: actors give 1000 steps/s each with no contention, learners 100
// updates/s each, U = 20 steps per update: one learner feeds on two actors.
func TestChooseBalances(t *testing.T) {
	fa, fl := Amdahl{F1: 1000}, Amdahl{F1: 100}
	all, err := Choose(fa, fl, Run{U: 20, Steps: 1e6}, 6)
	if err != nil {
		t.Fatal(err)
	}
	got := all[0]
	// Best rate 4000 (4 actors + 2 learners); the smallest allocation
	// within 1% of it is the same: 4 + 2 = 6.
	if got.Actors != 4 || got.Learners != 2 || got.Rate != 4000 {
		t.Fatalf("choice %+v, want 4 actors, 2 learners at 4000 steps/s", got)
	}
	if n := len(all); n != 15 {
		t.Fatalf("%d allocations for 6 cores, want 15", n)
	}
	// Learners that cannot keep up: every extra actor is wasted.
	all, _ = Choose(Amdahl{F1: 1000}, Amdahl{F1: 10, S: 1}, Run{U: 20, Steps: 1e6}, 4)
	if all[0].Actors != 1 || all[0].Learners != 1 {
		t.Fatalf("with saturated learners chose %+v, want 1 + 1", all[0])
	}
	for _, bad := range []struct {
		run   Run
		cores int
	}{
		{Run{U: 0, Steps: 1e6}, 4},
		{Run{U: math.Inf(1), Steps: 1e6}, 4},
		{Run{U: 1, Steps: 1e6}, 1},
		{Run{U: 1, Steps: 0}, 4},
		{Run{U: 1, Steps: 1e6, WarmUp: -1}, 4},
		{Run{U: 1, Steps: 1e6, Tie: 1}, 4},
		{Run{U: 1, Steps: 1e6, Tie: -0.1}, 4},
		{Run{U: 1, Steps: 1e6, Tie: math.NaN()}, 4},
	} {
		if _, err := Choose(fa, fl, bad.run, bad.cores); !errors.Is(err, ErrInput) {
			t.Errorf("%+v, %d cores: %v, want ErrInput", bad.run, bad.cores, err)
		}
	}
}

func TestPlot(t *testing.T) {
	path := t.TempDir() + "/fig12.png"
	fa, fl := Amdahl{F1: 1000, S: 0.2}, Amdahl{F1: 100, S: 0.4}
	all, err := Choose(fa, fl, Run{U: 20, Steps: 1e6}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := Plot(path, []Point{{1, 1000}, {2, 1700}}, []Point{{1, 100}}, fa, fl, 20, 4, all[0]); err != nil {
		t.Fatal(err)
	}
}

// TestSearchMeasuredTable feeds Search a measured table of herd tune on
// DQN CartPole (configs/dqn-cartpole-pal.yaml: 4 cores, U = 10, 10000
// warm-up steps; 2026-11-25, 2-core VM): the exhaustive search over the
// measured points picks 1 actor and 2 learners at 106690 env steps/s (the
// learners' curve falls from x = 2 to 3), where maximising the Amdahl fits
// picks 1 actor and 3 learners. The warm-up, at actor rates 8 to 14 times
// the learners', changes no choice: the same for the config's 500000 steps,
// the sweep's 100000 and none.
// measuredTable is the throughput table of TestSearchMeasuredTable and its
// Amdahl fits.
func measuredTable(t *testing.T) (actors, learners []Point, fa, fl Amdahl) {
	t.Helper()
	actors = []Point{{1, 834899}, {2, 1418583}, {3, 1303608}}
	learners = []Point{{1, 5102}, {2, 10669}, {3, 9331}}
	var err error
	if fa, err = Fit(actors); err != nil {
		t.Fatal(err)
	}
	if fl, err = Fit(learners); err != nil {
		t.Fatal(err)
	}
	return actors, learners, fa, fl
}

func TestSearchMeasuredTable(t *testing.T) {
	actors, learners, fa, fl := measuredTable(t)
	for _, run := range []Run{{U: 10, Steps: 500000, WarmUp: 10000}, {U: 10, Steps: 100000, WarmUp: 10000}, {U: 10, Steps: 100000}} {
		all, err := Search(actors, learners, fa, fl, run, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got := all[0]; got.Actors != 1 || got.Learners != 2 || got.Rate != 106690 || got.Predicted {
			t.Errorf("%+v: choice %+v, want 1 actor, 2 learners at 106690 env steps/s, measured", run, got)
		}
		if len(all) != 6 {
			t.Errorf("%d allocations for 4 cores, want 6", len(all))
		}
		if fit, _ := Choose(fa, fl, run, 4); fit[0].Actors == 1 && fit[0].Learners == 2 {
			t.Errorf("%+v: the fits alone pick %+v too: the table no longer tells the two apart", run, fit[0])
		}
	}
	// More cores than measured: the fits extrapolate, labelled.
	all, err := Search(actors, learners, fa, fl, Run{U: 10, Steps: 100000, WarmUp: 10000}, 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if want := a.Actors > 3 || a.Learners > 3; a.Predicted != want {
			t.Errorf("%+v: predicted %v, want %v", a, a.Predicted, want)
		}
	}
	if _, err := Search(actors, learners[1:], fa, fl, Run{U: 10, Steps: 100000}, 4); !errors.Is(err, ErrInput) {
		t.Errorf("learners not measured at x = 1: %v, want ErrInput", err)
	}
}

// TestWarmUp: the predicted run time T = W/f_a + (S−W)/min(f_a, U·f_l)
// changes eq. 5's choice when the warm-up takes a share of the run that
// more actors shorten by more than the 1% tie band, and not otherwise.
// Curves are given per count (measured points), U = 1, 4 cores.
func TestWarmUp(t *testing.T) {
	cases := []struct {
		name                string
		actors, learners    []float64 // f_a(1..3), f_l(1..3)
		steps, warmUp       int64
		wantA, wantL        int
		wantSec, wantSteady float64
	}{
		// Learner-bound at 1000 whatever the counts: without a warm-up all
		// tie and the fewest workers win.
		{"tie, no warm-up", []float64{1000, 2000, 2000}, []float64{1000, 1000, 1000}, 100000, 0, 1, 1, 100, 1000},
		// Half the run is warm-up: two actors finish it in half the time
		// (T = 25 + 50 s against 100 s); three are no faster than two.
		{"tie, warm-up", []float64{1000, 2000, 2000}, []float64{1000, 1000, 1000}, 100000, 50000, 2, 1, 75, 1000},
		// Actors 100 times the learners: the warm-up is 0.1% of the run,
		// inside the tie band, so the choice stays eq. 5's.
		{"fast actors, warm-up", []float64{100000, 200000, 200000}, []float64{1000, 1000, 1000}, 100000, 10000, 1, 1, 90.1, 1000},
		// Eq. 5 alone picks 1 actor + 2 learners (steady 1000 against
		// 900); a warm-up of 90% of the run makes 2 actors + 2 learners
		// faster (T = 50 + 10 s against 90 + 10 s).
		{"balance vs warm-up, none", []float64{1000, 1800, 1800}, []float64{900, 1000, 1000}, 100000, 0, 1, 2, 100, 1000},
		{"balance vs warm-up, 90%", []float64{1000, 1800, 1800}, []float64{900, 1000, 1000}, 100000, 90000, 2, 2, 90000.0/1800 + 10, 1000},
		// A warm-up longer than the run: actors alone.
		{"all warm-up", []float64{1000, 1800, 2500}, []float64{1, 1, 1}, 1000, 5000, 3, 1, 0.4, 1},
	}
	for _, c := range cases {
		var pa, pl []Point
		for i := range c.actors {
			pa, pl = append(pa, Point{i + 1, c.actors[i]}), append(pl, Point{i + 1, c.learners[i]})
		}
		all, err := Search(pa, pl, Amdahl{F1: 1}, Amdahl{F1: 1}, Run{U: 1, Steps: c.steps, WarmUp: c.warmUp}, 4)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := all[0]
		if got.Actors != c.wantA || got.Learners != c.wantL || math.Abs(got.Seconds-c.wantSec) > 1e-9*c.wantSec ||
			got.Rate != c.wantSteady || math.Abs(got.RunRate-float64(c.steps)/c.wantSec) > 1e-6 {
			t.Errorf("%s: choice %+v, want %d actors, %d learners, %v s, steady %v env steps/s", c.name, got, c.wantA, c.wantL, c.wantSec, c.wantSteady)
		}
	}
}

// TestSummary: median and half-range over the median of repeated
// measurements.
func TestSummary(t *testing.T) {
	cases := []struct {
		ys          []float64
		med, spread float64
	}{
		{[]float64{100}, 100, 0},
		{[]float64{120, 80, 100}, 100, 0.2},
		{[]float64{90, 110, 100, 300}, 105, 1},
	}
	for _, c := range cases {
		m, sp, err := Summary(c.ys)
		if err != nil || m != c.med || math.Abs(sp-c.spread) > 1e-12 {
			t.Errorf("%v: %v ± %v, %v; want %v ± %v", c.ys, m, sp, err, c.med, c.spread)
		}
	}
	for _, bad := range [][]float64{nil, {1, 0}, {math.NaN()}, {math.Inf(1)}} {
		if _, _, err := Summary(bad); !errors.Is(err, ErrInput) {
			t.Errorf("%v: %v, want ErrInput", bad, err)
		}
	}
}

// TestTieBand: two learners measured 10% faster than one win with the
// default 1% band, and tie with one (which then wins, fewer workers) when
// the measurements' spread is 20%.
func TestTieBand(t *testing.T) {
	pa := []Point{{1, 1e6}, {2, 1e6}}
	pl := []Point{{1, 1000}, {2, 1100}}
	for _, c := range []struct {
		tie          float64
		wantA, wantL int
	}{{0, 1, 2}, {0.05, 1, 2}, {0.2, 1, 1}} {
		all, err := Search(pa, pl, Amdahl{F1: 1}, Amdahl{F1: 1}, Run{U: 1, Steps: 1e6, Tie: c.tie}, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := all[0]; got.Actors != c.wantA || got.Learners != c.wantL {
			t.Errorf("tie %v: choice %+v, want %d actors, %d learners", c.tie, got, c.wantA, c.wantL)
		}
	}
}

// Tied keeps the measured allocations within the band of the best
// measured run rate, in the ranked order, and never a prediction.
func TestTied(t *testing.T) {
	allocs := []Allocation{
		{Actors: 1, Learners: 1, RunRate: 90},
		{Actors: 2, Learners: 1, RunRate: 100},
		{Actors: 3, Learners: 1, RunRate: 200, Predicted: true},
		{Actors: 1, Learners: 2, RunRate: 80},
	}
	got := Tied(allocs, Run{Tie: 0.15})
	if len(got) != 2 || got[0].Actors != 1 || got[1].Actors != 2 {
		t.Errorf("Tied(15%%) = %+v, want (1,1) and (2,1)", got)
	}
	if got := Tied(allocs, Run{Tie: 0.01}); len(got) != 1 || got[0].Actors != 2 {
		t.Errorf("Tied(1%%) = %+v, want (2,1) alone", got)
	}
}

// TestMostActors: among tied allocations herd tune takes the most actors,
// then the fewest learners, whatever the order of the list.
func TestMostActors(t *testing.T) {
	a := func(x, l int) Allocation { return Allocation{Actors: x, Learners: l} }
	cases := []struct {
		tied []Allocation
		want Allocation
	}{
		{[]Allocation{a(1, 1), a(2, 1), a(3, 1)}, a(3, 1)},
		{[]Allocation{a(3, 1), a(1, 1), a(2, 1)}, a(3, 1)},
		{[]Allocation{a(1, 3), a(1, 2)}, a(1, 2)},
		{[]Allocation{a(1, 2), a(2, 2), a(2, 1)}, a(2, 1)},
	}
	for _, c := range cases {
		if got := MostActors(c.tied); got != c.want {
			t.Errorf("MostActors(%v) = %v, want %v", c.tied, got, c.want)
		}
	}
}
