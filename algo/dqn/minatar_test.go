package dqn

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"runtime"
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

// TestMinAtarReplayMemoryEstimate: MinAtar's binary planes are stored a
// bit a value, and the memory estimate counts what the replay allocates:
// for 100k transitions, s and s' of 10×10×4 bits (50 bytes each, 25
// words together), a, r and the flags (a word each) and the slot's
// generation (8 bytes), 120 bytes a transition (3,220 as float32) — with
// one float32 word more for s and s' each with n_steps > 1 (their
// discount column).
func TestMinAtarReplayMemoryEstimate(t *testing.T) {
	e, err := env.Make("MinAtar/Breakout-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, tc := range []struct {
		nSteps int
		slot   float64
	}{{1, 120}, {3, 128}} {
		cfg := minatarConfig()
		cfg.BufferSize, cfg.NSteps = 100000, tc.nSteps
		var est float64
		for _, u := range algo.EstimateMemory(algo.Header{Env: "MinAtar/Breakout-v1"}, cfg, e.ObservationSpace(), e.ActionSpace(), 0, nil) {
			if u.What == "replay buffer" {
				est = u.Bytes
			}
		}
		if want := 100000 * tc.slot; est != want {
			t.Fatalf("n_steps %d: replay buffer %v bytes, want %v", tc.nSteps, est, want)
		}
		p, err := newPieces(algo.Header{Env: "MinAtar/Breakout-v1", Steps: 1000}, cfg, algo.Spaces{Obs: e.ObservationSpace(), Act: e.ActionSpace()})
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rb, err := p.newReplay()
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(rb)
		// The stripe locks (64 KiB) and the replay's workspaces besides.
		if got := float64(after.TotalAlloc - before.TotalAlloc); got < est || got > est+256<<10 {
			t.Fatalf("n_steps %d: the replay allocated %v bytes, estimated %v", tc.nSteps, got, est)
		}
	}
}
