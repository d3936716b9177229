package algo

import (
	"context"
	"errors"
	"herd/env"
	"math"
	"testing"
)

// alwaysLeft pushes CartPole left every step: a fixed, easy-to-predict
// policy whose episodes end in ~10 steps.
type alwaysLeft struct{}

func (alwaysLeft) Act(dst, _ []float32) []float32 { dst[0] = 0; return dst[:1] }

func TestEvaluate(t *testing.T) {
	a, err := Evaluate(context.Background(), alwaysLeft{}, env.Maker{}, "CartPole-v1", 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Evaluate(context.Background(), alwaysLeft{}, env.Maker{}, "CartPole-v1", 4, 7)
	if len(a) != 4 {
		t.Fatalf("returns %v", a)
	}
	for i := range a {
		if a[i] != b[i] || a[i] < 5 || a[i] > 20 {
			t.Fatalf("returns %v and %v: want equal, each 5–20 for a constant push", a, b)
		}
	}
	if _, err := Evaluate(context.Background(), alwaysLeft{}, env.Maker{}, "CartPole-v1", 0, 1); !errors.Is(err, ErrConfig) {
		t.Fatalf("0 episodes: %v", err)
	}
	if _, err := Evaluate(context.Background(), alwaysLeft{}, env.Maker{}, "Nope-v0", 1, 1); err == nil {
		t.Fatal("unknown env: want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Evaluate(ctx, alwaysLeft{}, env.Maker{}, "CartPole-v1", 3, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	m, s := MeanStd([]float64{1, 3})
	if m != 2 || s != 1 {
		t.Fatalf("MeanStd = %v, %v", m, s)
	}
	if m, _ := MeanStd(nil); !math.IsNaN(m) {
		t.Fatal("MeanStd(nil) should be NaN")
	}
}
