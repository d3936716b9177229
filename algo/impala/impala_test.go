package impala

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"herd/algo"
	"herd/env"
)

// TestSmoke trains a short run on 4 workers (the flow executor runs the
// plan) with the least lag bound and with a wider one, and checks what
// can go wrong: the run reports every step of its budget, the learner
// took one update per segment, every loss is finite, the weights moved
// away from their initial values, and no segment was learned more than
// max_policy_lag versions after its policy — exactly that many at the
// least bound, where segments are learned in the order they were asked
// for (4 workers × 2 in flight − 1 = 7).
func TestSmoke(t *testing.T) {
	for _, c := range []struct{ maxLag, want int }{{0, 7}, {12, 12}} {
		file := fmt.Sprintf("algo: impala\nenv: CartPole-v1\nsteps: 2048\nruntime: {executor: flow, env_workers: 4}\n"+
			"impala: {num_envs: 4, num_steps: 16, num_async: 2, max_policy_lag: %d}\n", c.maxLag)
		res, err := algo.Resolve([]byte(file), []algo.Spec{Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		log := &lastLog{stats: map[string]float64{}, calls: map[string]int{}}
		m, err := Spec().Train(context.Background(), &algo.Runtime{Header: res.Header, Log: log}, res.Config)
		if err != nil || m == nil {
			t.Fatal(m, err)
		}
		if log.step != 2048 {
			t.Errorf("reported %d steps, want 2048", log.step)
		}
		if n := log.calls["losses/value_loss"]; n != 2048/16 {
			t.Errorf("%d updates, want one per segment of 16 steps: %d", n, 2048/16)
		}
		if log.nonFinite != "" {
			t.Errorf("%s logged a non-finite value", log.nonFinite)
		}
		if rho := log.stats["losses/mean_rho"]; !(rho > 0 && rho <= 1) {
			t.Errorf("mean ρ %v, want in (0, 1]", rho)
		}
		lagMax := log.stats["charts/policy_lag_max"]
		if c.maxLag == 0 && lagMax != float64(c.want) || lagMax > float64(c.want) || lagMax < 1 {
			t.Errorf("max_policy_lag %d: largest lag %v, want %s %d", c.maxLag, lagMax, map[bool]string{true: "=", false: "1 …"}[c.maxLag == 0], c.want)
		}
		if bytes.Equal(saved(t, m), saved(t, initialModel(t, res))) {
			t.Error("the weights did not change")
		}
	}
}

// initialModel is the model of a learner built from res before any update.
func initialModel(t *testing.T, res *algo.Resolved) algo.Model {
	t.Helper()
	e, err := env.Make(res.Header.Env)
	if err != nil {
		t.Fatal(err)
	}
	sp := algo.SpacesOf(e)
	e.Close()
	pc, err := res.Spec.Pieces(res.Header, res.Config, sp)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pc.NewSegmentLearner()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(interface{ Model() algo.Model }).Model()
}

func saved(t *testing.T, m algo.Model) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type lastLog struct {
	step      int64
	stats     map[string]float64
	calls     map[string]int
	nonFinite string
}

func (l *lastLog) Episode(int64, float64, int) {}
func (l *lastLog) Scalar(name string, v float64) {
	l.stats[name] = v
	l.calls[name]++
	if (math.IsNaN(v) || math.IsInf(v, 0)) && l.nonFinite == "" {
		l.nonFinite = name
	}
}
func (l *lastLog) Step(s int64) { l.step = s }
