package onpolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
)

// TestActorObs checks the split of MAPPO's rows: with ActorObs = k the
// policy's outputs (logits) depend only on the first k values of a row,
// the critic's value on all of them.
func TestActorObs(t *testing.T) {
	cfg := AgentConfig{Hidden: []int{8}, Act: nn.Tanh, OrthoInit: true, ActorObs: 3}
	p, err := NewPolicy(algo.Spaces{Obs: env.UniformBox(-5, 5, 7), Act: env.Discrete{N: 4}}, cfg, rng.New(1, "test", 0))
	if err != nil {
		t.Fatal(err)
	}
	a := []float32{0.1, -0.2, 0.3, 1, 2, 3, 4}
	b := slices.Clone(a)
	b[5] = -3 // a critic-only value
	dst := make([]float32, p.OutDim())
	ra := slices.Clone(p.ForwardTo(dst, a, 1))
	rb := slices.Clone(p.ForwardTo(dst, b, 1))
	w := len(ra)
	if !slices.Equal(ra[:w-1], rb[:w-1]) {
		t.Fatalf("the actor read a value past actor_obs: %v vs %v", ra, rb)
	}
	if ra[w-1] == rb[w-1] {
		t.Fatal("the critic ignored a value past actor_obs")
	}
	c := slices.Clone(a)
	c[1] = 4 // an actor value
	if rc := p.ForwardTo(dst, c, 1); slices.Equal(ra[:w-1], rc[:w-1]) {
		t.Fatal("the actor ignored one of its values")
	}
	cfg.ActorObs = 8
	if _, err := NewAgent(env.UniformBox(-5, 5, 7), env.Discrete{N: 4}, cfg, rng.New(1, "test", 0)); !errors.Is(err, ErrSpace) {
		t.Fatalf("actor_obs past the observation: %v", err)
	}
}

// TestActorObsRows checks actor_obs against the rows of simple_spread:
// only the agent's own observation and id, with the global state after
// them, is MAPPO; every other combination is refused with the value to
// set.
func TestActorObsRows(t *testing.T) {
	cases := []struct {
		id       string
		actorObs int
		want     string // "" = accepted
	}{
		{"mpe/simple_spread_v3?agent_id=true&state=true", 21, ""},
		{"mpe/simple_spread_v3?agent_id=true", 21, "IPPO, not MAPPO"},
		{"mpe/simple_spread_v3?state=true", 21, "reads 3 values of the global state"},
		{"mpe/simple_spread_v3?N=4&agent_id=true&state=true", 21, "set actor_obs: 28"},
		{"mpe/simple_spread_v3?agent_id=true&state=true", 0, "set actor_obs: 21"},
		{"mpe/simple_spread_v3?agent_id=true", 0, ""},
		{"CartPole-v1", 2, "needs a multi-agent env"},
	}
	for _, c := range cases {
		n := 1
		if env.IsParallel(c.id) {
			n = 12 // 4 or 3 agents' rows
		}
		v, err := env.MakeVector(c.id, n, env.Sync)
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		cfg := AgentConfig{Hidden: []int{8}, Act: nn.Tanh, ActorObs: c.actorObs}
		_, err = NewPieces("ppo", algo.Header{Seed: 1}, algo.SpacesOf(v), cfg, nil)
		v.Close()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s actor_obs %d: %v", c.id, c.actorObs, err)
		case c.want != "" && (!errors.Is(err, ErrSpace) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s actor_obs %d: got %v, want an ErrSpace saying %q", c.id, c.actorObs, err, c.want)
		}
	}
}
