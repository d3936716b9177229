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
	all, err := Choose(fa, fl, 20, 6)
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
	all, _ = Choose(Amdahl{F1: 1000}, Amdahl{F1: 10, S: 1}, 20, 4)
	if all[0].Actors != 1 || all[0].Learners != 1 {
		t.Fatalf("with saturated learners chose %+v, want 1 + 1", all[0])
	}
	if _, err := Choose(fa, fl, 0, 4); !errors.Is(err, ErrInput) {
		t.Fatalf("U = 0: %v", err)
	}
	if _, err := Choose(fa, fl, 1, 1); !errors.Is(err, ErrInput) {
		t.Fatalf("1 core: %v", err)
	}
}

func TestPlot(t *testing.T) {
	path := t.TempDir() + "/fig12.png"
	fa, fl := Amdahl{F1: 1000, S: 0.2}, Amdahl{F1: 100, S: 0.4}
	all, err := Choose(fa, fl, 20, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := Plot(path, []Point{{1, 1000}, {2, 1700}}, []Point{{1, 100}}, fa, fl, 20, 4, all[0]); err != nil {
		t.Fatal(err)
	}
}

// TestSearchMeasuredTable feeds Search the measured table of
// docs/BENCHMARKS.md ("herd tune on DQN CartPole", 4 cores, U = 10): the
// exhaustive search over the measured points picks 1 actor and 2
// learners at 106690 env steps/s (the learners' curve falls from x = 2 to
// 3), where maximising the Amdahl fits picks 1 actor and 3 learners.
func TestSearchMeasuredTable(t *testing.T) {
	actors := []Point{{1, 834899}, {2, 1418583}, {3, 1303608}}
	learners := []Point{{1, 5102}, {2, 10669}, {3, 9331}}
	fa, err := Fit(actors)
	if err != nil {
		t.Fatal(err)
	}
	fl, err := Fit(learners)
	if err != nil {
		t.Fatal(err)
	}
	all, err := Search(actors, learners, fa, fl, 10, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := all[0]; got.Actors != 1 || got.Learners != 2 || got.Rate != 106690 || got.Predicted {
		t.Errorf("choice %+v, want 1 actor, 2 learners at 106690 env steps/s, measured", got)
	}
	if len(all) != 6 {
		t.Errorf("%d allocations for 4 cores, want 6", len(all))
	}
	if fit, _ := Choose(fa, fl, 10, 4); fit[0].Actors == 1 && fit[0].Learners == 2 {
		t.Errorf("the fits alone pick %+v too: the table no longer tells the two apart", fit[0])
	}
	// More cores than measured: the fits extrapolate, labelled.
	all, err = Search(actors, learners, fa, fl, 10, 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if want := a.Actors > 3 || a.Learners > 3; a.Predicted != want {
			t.Errorf("%+v: predicted %v, want %v", a, a.Predicted, want)
		}
	}
	if _, err := Search(actors, learners[1:], fa, fl, 10, 4); !errors.Is(err, ErrInput) {
		t.Errorf("learners not measured at x = 1: %v, want ErrInput", err)
	}
}
