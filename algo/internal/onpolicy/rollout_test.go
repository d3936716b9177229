package onpolicy

import (
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
)

// chain is a one-env Vector whose episodes last 3 steps: observation = the
// step within the episode (0, 1, 2), reward 1, and episodes alternately end
// truncated (time limit) and terminated.
type chain struct {
	t, episode int
	b          env.Batch
}

func newChain() *chain {
	return &chain{b: env.Batch{ObsDim: 1, Obs: make([]float32, 1), Rewards: make([]float32, 1),
		Terminated: make([]bool, 1), Truncated: make([]bool, 1), Infos: make([]env.Info, 1), FinalObs: make([]float32, 1)}}
}

func (c *chain) NumEnvs() int                { return 1 }
func (c *chain) ObservationSpace() env.Space { return env.UniformBox(0, 10, 1) }
func (c *chain) ActionSpace() env.Space      { return env.Discrete{N: 2} }
func (c *chain) Close() error                { return nil }
func (c *chain) Reset(int64) (*env.Batch, error) {
	c.t = 0
	c.b.Obs[0] = 0
	return &c.b, nil
}
func (c *chain) Step([]float32) (*env.Batch, error) {
	c.t++
	c.b.Rewards[0] = 1
	c.b.Terminated[0], c.b.Truncated[0] = false, false
	c.b.Infos[0] = env.Info{}
	if c.t == 3 {
		if c.episode%2 == 0 {
			c.b.Truncated[0] = true
		} else {
			c.b.Terminated[0] = true
		}
		c.b.Infos[0] = env.Info{HasEpisode: true, Episode: env.EpisodeStats{Return: 3, Length: 3}}
		c.b.FinalObs[0] = float32(c.t)
		c.episode++
		c.t = 0
	}
	c.b.Obs[0] = float32(c.t)
	return &c.b, nil
}

type episodeLog struct {
	algo.Logger
	steps []int64
}

func (l *episodeLog) Episode(step int64, _ float64, length int) { l.steps = append(l.steps, step) }

// TestCollectBootstrapsTruncation: a truncated episode's last reward gets
// γ·V(true final observation); a terminated one does not; Dones marks both.
func TestCollectBootstrapsTruncation(t *testing.T) {
	envs := newChain()
	agent, err := NewAgent(envs.ObservationSpace(), envs.ActionSpace(),
		AgentConfig{Hidden: []int{8}, Act: nn.Tanh, OrthoInit: true}, rng.New(1, "test/agent", 0))
	if err != nil {
		t.Fatal(err)
	}
	// Make V non-trivial so that the bootstrap is visible.
	for _, p := range agent.critic.Params() {
		for i := range p.Value {
			p.Value[i] += 0.3
		}
	}
	ro := NewRollout(6, 1, 1, 1)
	if err := ro.Reset(envs, 0); err != nil {
		t.Fatal(err)
	}
	log := &episodeLog{Logger: algo.Discard()}
	var step int64
	const gamma = 0.9
	if err := ro.Collect(envs, agent, rng.New(1, "test/act", 0), log, &step, gamma); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, 1)
	agent.Value(v, []float32{3}, 1)
	wantRewards := []float32{1, 1, 1 + gamma*v[0], 1, 1, 1}
	wantDones := []float32{0, 0, 1, 0, 0, 1}
	for k := range wantRewards {
		if ro.Rewards[k] != wantRewards[k] || ro.Dones[k] != wantDones[k] {
			t.Fatalf("step %d: reward %v done %v, want %v %v", k, ro.Rewards[k], ro.Dones[k], wantRewards[k], wantDones[k])
		}
	}
	if step != 6 || len(log.steps) != 2 || log.steps[0] != 3 || log.steps[1] != 6 {
		t.Fatalf("global step %d, episodes logged at %v; want 6 and [3 6]", step, log.steps)
	}
	// Observations the actions were taken on: 0 1 2 0 1 2.
	for k, want := range []float32{0, 1, 2, 0, 1, 2} {
		if ro.Obs[k] != want {
			t.Fatalf("obs %v", ro.Obs)
		}
	}
}

// TestAgentNamesAndSpaces: parameters carry CleanRL's state-dict names, and
// unsupported spaces are errors.
func TestAgentNamesAndSpaces(t *testing.T) {
	r := rng.New(1, "test/agent", 0)
	a, err := NewAgent(env.UniformBox(-1, 1, 3), env.UniformBox(-2, 2, 2), AgentConfig{Hidden: []int{64, 64}, Act: nn.Tanh, OrthoInit: true}, r)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range a.Params() {
		names = append(names, p.Name)
	}
	want := []string{"actor.0.weight", "actor.0.bias", "actor.2.weight", "actor.2.bias", "actor.4.weight", "actor.4.bias",
		"critic.0.weight", "critic.0.bias", "critic.2.weight", "critic.2.bias", "critic.4.weight", "critic.4.bias", "actor_logstd"}
	if len(names) != len(want) {
		t.Fatalf("names %v", names)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("names %v, want %v", names, want)
		}
	}
	// Deterministic action: the mean, clipped to the bounds.
	act := a.Act(make([]float32, 2), []float32{0.1, 0.2, 0.3})
	for _, v := range act {
		if v < -2 || v > 2 {
			t.Fatalf("action %v out of bounds", act)
		}
	}
	// A Discrete space that starts at −1: indices are stored, values sent.
	d, err := NewAgent(env.UniformBox(-1, 1, 3), env.Discrete{N: 3, Start: -1}, AgentConfig{Hidden: []int{4}, Act: nn.Tanh}, r)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.EnvActionsTo(make([]float32, 3), []float32{0, 1, 2}); got[0] != -1 || got[1] != 0 || got[2] != 1 {
		t.Fatalf("env actions %v, want [-1 0 1]", got)
	}
	if v := d.Act(make([]float32, 1), []float32{0, 0, 0})[0]; v < -1 || v > 1 {
		t.Fatalf("greedy action %v outside {-1, 0, 1}", v)
	}
	if _, err := NewAgent(env.UniformBox(-1, 1, 3), env.MultiDiscrete{Nvec: []int{2, 2}}, AgentConfig{Hidden: []int{4}, Act: nn.Tanh}, r); err == nil {
		t.Fatal("want an error for MultiDiscrete actions")
	}
	if _, err := NewAgent(env.Discrete{N: 3}, env.Discrete{N: 2}, AgentConfig{Hidden: []int{4}, Act: nn.Tanh}, r); err == nil {
		t.Fatal("want an error for Discrete observations")
	}
}
