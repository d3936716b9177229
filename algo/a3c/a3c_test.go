package a3c

import (
	"context"
	"testing"

	"herd/algo"
)

// TestSmoke trains a few segments under the local executor (which runs
// the plan) and checks the run reported every step and its losses.
func TestSmoke(t *testing.T) {
	res, err := algo.Resolve([]byte("algo: a3c\nenv: CartPole-v1\nsteps: 2048\na3c: {num_envs: 4, num_steps: 8}\n"),
		[]algo.Spec{Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	log := &lastLog{stats: map[string]float64{}}
	m, err := Spec().Train(context.Background(), &algo.Runtime{Header: res.Header, Log: log}, res.Config)
	if err != nil || m == nil {
		t.Fatal(m, err)
	}
	if log.step != 2048 {
		t.Errorf("reported %d steps, want 2048", log.step)
	}
	if _, ok := log.stats["losses/value_loss"]; !ok {
		t.Error("no value loss reported")
	}
	if lag, ok := log.stats["charts/policy_lag"]; !ok || lag < 0 {
		t.Errorf("policy lag %v (reported: %v)", lag, ok)
	}
}

type lastLog struct {
	step  int64
	stats map[string]float64
}

func (l *lastLog) Episode(int64, float64, int)   {}
func (l *lastLog) Scalar(name string, v float64) { l.stats[name] = v }
func (l *lastLog) Step(s int64)                  { l.step = s }
