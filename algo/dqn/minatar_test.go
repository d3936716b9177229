package dqn

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
)

// minatarConfig is configs/dqn-minatar-breakout.yaml at a tiny budget.
func minatarConfig() *Config {
	c := NewConfig()
	c.Encoder, c.NetArch = EncoderMinAtar, []int{128}
	c.Optimizer, c.RMSPropAlpha, c.RMSPropEps, c.RMSPropCentered = "rmsprop", 0.95, 0.01, true
	c.Loss = "huber"
	c.BufferSize, c.BatchSize, c.LearningStarts, c.TrainFrequency = 2000, 32, 100, 1
	c.TargetNetworkFrequency, c.EndE, c.ExplorationFraction = 100, 0.1, 0.5
	return c
}

// lossLog keeps every TD loss DQN reports.
type lossLog struct{ losses []float64 }

func (l *lossLog) Episode(int64, float64, int) {}
func (l *lossLog) Step(int64)                  {}
func (l *lossLog) Scalar(name string, v float64) {
	if name == "losses/td_loss" {
		l.losses = append(l.losses, v)
	}
}

// trainMinAtar trains the minatar encoder on MinAtar/Breakout-v1 for
// steps and returns the agent and the TD losses logged.
func trainMinAtar(t *testing.T, steps int64) (*Agent, []float64) {
	t.Helper()
	h := algo.Header{Algo: "dqn", Env: "MinAtar/Breakout-v1", Seed: 3, Steps: steps}
	h.EnsureDefaults()
	lg := &lossLog{}
	m, err := Train(context.Background(), &algo.Runtime{Header: h, Log: lg}, minatarConfig())
	if err != nil {
		t.Fatal(err)
	}
	return m.(*Agent), lg.losses
}

// TestMinAtarEncoderTrains: DQN with MinAtar's network and optimizer
// trains on MinAtar Breakout — the weights move from their
// initialisation, every loss is finite, a second run with the seed is
// bit-identical, and the checkpoint reloads (herd eval) to the same
// greedy actions.
func TestMinAtarEncoderTrains(t *testing.T) {
	a, losses := trainMinAtar(t, 400)
	if _, ok := a.q.(convQ); !ok {
		t.Fatalf("Q-network is %T, want the convolutional one", a.q)
	}
	if len(losses) == 0 {
		t.Fatal("no TD loss logged")
	}
	for _, l := range losses {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			t.Fatalf("loss %v", l)
		}
	}
	e, err := env.Make("MinAtar/Breakout-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	init, err := newAgent(minatarConfig(), e.ObservationSpace(), a.nActions, rng.New(3, "dqn/init", 0))
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i, p := range a.Params() {
		for j, v := range p.Value {
			if v != init.Params()[i].Value[j] {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("no weight changed")
	}
	b, _ := trainMinAtar(t, 400)
	for i, p := range a.Params() {
		for j, v := range p.Value {
			if math.Float32bits(v) != math.Float32bits(b.Params()[i].Value[j]) {
				t.Fatalf("runs differ at %s[%d]", p.Name, j)
			}
		}
	}

	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := a.Save(path); err != nil {
		t.Fatal(err)
	}
	pol, err := LoadPolicy(path, algo.Header{Env: "MinAtar/Breakout-v1", Seed: 9}, minatarConfig())
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := e.Reset(5)
	if err != nil {
		t.Fatal(err)
	}
	var x, y [1]float32
	if a.Act(x[:], obs); pol.Act(y[:], obs)[0] != x[0] {
		t.Fatalf("reloaded policy acts %v, trained %v", y[0], x[0])
	}
}

// TestConvEncoderNeedsImages: a convolutional encoder on a vector
// observation is refused with a clear error, by Validate and by the
// network builder.
func TestConvEncoderNeedsImages(t *testing.T) {
	cfg := minatarConfig()
	err := cfg.Validate(algo.Header{Env: "CartPole-v1"})
	if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "not an image") {
		t.Fatalf("Validate: %v", err)
	}
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := newQNet(cfg, e.ObservationSpace(), 2, rng.New(1, "t", 0)); !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("newQNet: %v", err)
	}
	cfg.Encoder = "resnet"
	if err := cfg.Validate(algo.Header{}); err == nil || !strings.Contains(err.Error(), "encoder must be") {
		t.Fatalf("unknown encoder: %v", err)
	}
	cfg = minatarConfig()
	cfg.Optimizer = "sgd"
	if err := cfg.Validate(algo.Header{}); err == nil || !strings.Contains(err.Error(), "optimizer must be") {
		t.Fatalf("unknown optimizer: %v", err)
	}
}

// TestMinAtarReplayMemoryEstimate: the memory estimate counts the
// replay's image frames, s and s' of 10×10×4 float32 each, for
// MinAtar's 100k transitions.
func TestMinAtarReplayMemoryEstimate(t *testing.T) {
	e, err := env.Make("MinAtar/Breakout-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cfg := minatarConfig()
	cfg.BufferSize = 100000
	for _, u := range algo.EstimateMemory(algo.Header{Env: "MinAtar/Breakout-v1"}, cfg, e.ObservationSpace(), e.ActionSpace(), 0, nil) {
		if u.What != "replay buffer" {
			continue
		}
		// s, s' (400 floats each), a, r, terminated, truncated, discount
		if want := 100000.0 * 4 * (2*10*10*4 + 1 + 4); u.Bytes != want {
			t.Fatalf("replay buffer %v bytes, want %v", u.Bytes, want)
		}
		return
	}
	t.Fatal("no replay buffer line")
}
