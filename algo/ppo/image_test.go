package ppo

import (
	"fmt"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/algo/internal/onpolicy"
	"herd/internal/rng"
)

// TestPPOImageEncoder trains PPO with MinAtar's convolutional encoder on
// MinAtar Breakout's 10×10×4 frames: the actor and the critic each start
// with a 16×4×3×3 convolution, the run is deterministic in its seed, and
// the saved model reloads into a policy that acts as the trained one on
// random frames, within Breakout-v1's three actions.
func TestPPOImageEncoder(t *testing.T) {
	agent := trainMinAtar(t, 1024, 3, "")
	for _, want := range []struct {
		name  string
		shape []int
	}{{"actor.0.weight", []int{16, 4, 3, 3}}, {"critic.0.weight", []int{16, 4, 3, 3}}} {
		found := false
		for _, p := range agent.Params() {
			if p.Name == want.name {
				found = true
				if len(p.Shape) != len(want.shape) || p.Shape[0] != want.shape[0] || p.Shape[1] != want.shape[1] {
					t.Errorf("%s has shape %v, want %v", p.Name, p.Shape, want.shape)
				}
			}
		}
		if !found {
			t.Errorf("no parameter %s", want.name)
		}
	}
	if err := Spec().NewConfig().(*Config).Validate(algo.Header{Env: "CartPole-v1", Steps: 1 << 20}); err != nil {
		t.Fatalf("mlp on CartPole: %v", err)
	}
	bad := DefaultConfig()
	bad.Encoder = "nature"
	learntest.ConfigError(t, bad.Validate(algo.Header{Env: "CartPole-v1", Steps: 1 << 20}), "not an image")
}

// TestPPOSharedEncoder trains PPO with one MinAtar encoder for both heads
// (shared_encoder, CleanRL's ppo_atari.py layout) through a config file:
// deterministic, saved and reloaded, and refused without a conv encoder.
func TestPPOSharedEncoder(t *testing.T) {
	agent := trainMinAtar(t, 512, 2, "  shared_encoder: true\n")
	var names []string
	for _, p := range agent.Params() {
		names = append(names, p.Name)
	}
	if want := "network.0.weight network.0.bias network.3.weight network.3.bias actor.weight actor.bias critic.weight critic.bias"; strings.Join(names, " ") != want {
		t.Errorf("params %v, want %s", names, want)
	}
	bad := DefaultConfig()
	bad.SharedEncoder = true
	learntest.ConfigError(t, bad.Validate(algo.Header{Env: "CartPole-v1", Steps: 1 << 20}), "shared_encoder needs a convolutional encoder")
}

// trainMinAtar trains PPO with the minatar encoder (hidden [32], the
// config's extra ppo lines added) on MinAtar Breakout for steps, checks
// that runs deterministic in their seed and that the saved model reloads
// into a policy acting as the trained one on random frames, within
// Breakout-v1's three actions, and returns the trained agent.
func trainMinAtar(t *testing.T, steps, runs int, extra string) *onpolicy.Agent {
	t.Helper()
	res := learntest.Resolve(t, Spec(), fmt.Sprintf("algo: ppo\nenv: MinAtar/Breakout-v1\nsteps: %d\nlog_every: 256\n", steps)+
		"ppo:\n  encoder: minatar\n  hidden: [32]\n  num_envs: 2\n  num_steps: 128\n"+extra)
	cfg := res.Config.(*Config)
	learntest.Deterministic(t, Spec(), res.Header, cfg, runs)
	r := rng.New(1, "test/frames", 0)
	learntest.SaveLoad(t, Spec(), res.Header, cfg, 1, 20, func(int) []float32 {
		x := make([]float32, 10*10*4)
		for i := range x {
			x[i] = float32(r.IntN(2))
		}
		return x
	}, 0, 2)
	agent, err := Train(t.Context(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return agent
}
