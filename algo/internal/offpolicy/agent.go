package offpolicy

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
)

// NewCritics builds n Q networks Q(s, a) with hidden widths arch (ReLU),
// one after the other from r, so that the draws match building them one by
// one.
func NewCritics(n, obsDim, actDim int, arch []int, r *rand.Rand) ([]*nn.Critic, error) {
	qs := make([]*nn.Critic, n)
	for i := range qs {
		q, err := nn.NewCritic(obsDim, actDim, nn.MLPConfig{Hidden: arch, Act: nn.ReLU}, r)
		if err != nil {
			return nil, err
		}
		qs[i] = q
	}
	return qs, nil
}

// LoadPolicy is an off-policy algorithm's LoadPolicy: c must be a *C,
// whose hidden widths arch returns; the rest is LoadAgent.
func LoadPolicy[C any, A algo.Policy](name, path string, h algo.Header, c algo.Config, arch func(*C) []int,
	build func(obsDim int, low, high []float32, arch []int, r *rand.Rand) (A, error),
	nets func(A) []Named) (algo.Policy, error) {
	cfg, ok := any(c).(*C)
	if !ok {
		return nil, fmt.Errorf("%w: %s: config is %T", algo.ErrConfig, name, c)
	}
	agent, err := LoadAgent(name, path, h, arch(cfg), build, nets)
	if err != nil {
		return nil, err // a nil agent must not become a non-nil algo.Policy
	}
	return agent, nil
}

// LoadAgent rebuilds the agent that algorithm name's Train built for h and
// reads its networks back from path (written by Save). build is the
// algorithm's constructor; it gets the env's observation size and action
// bounds and the init stream (h.Seed, name+"/init", 0), as in Train, so a
// network missing from the file is caught by Load, not silently random.
func LoadAgent[A any](name, path string, h algo.Header, arch []int,
	build func(obsDim int, low, high []float32, arch []int, r *rand.Rand) (A, error),
	nets func(A) []Named) (A, error) {
	var zero A
	e, err := h.Envs.Make(h.Env)
	if err != nil {
		return zero, err
	}
	defer e.Close()
	low, high, err := BoxBounds(h.Env, e.ActionSpace())
	if err != nil {
		return zero, fmt.Errorf("%w: %s: %w", algo.ErrConfig, name, err)
	}
	agent, err := build(e.ObservationSpace().Dim(), low, high, arch, rng.New(h.Seed, name+"/init", 0))
	if err != nil {
		return zero, err
	}
	if err := Load(path, nets(agent)); err != nil {
		return zero, fmt.Errorf("%s: load %s: %w", name, path, err)
	}
	return agent, nil
}

// PolyakAll moves every target network towards its online network,
// θ' ← τθ + (1 − τ)θ' (nn.PolyakUpdate), pairs given as {target, online}.
func PolyakAll(tau float64, pairs ...[2][]*nn.Param) error {
	for _, p := range pairs {
		if err := nn.PolyakUpdate(p[0], p[1], float32(tau)); err != nil {
			return err
		}
	}
	return nil
}

// TrainFunc adapts an algorithm's typed Train to algo.Spec.Train: a config
// that is not a *C is an ErrConfig error, not a panic.
func TrainFunc[C any](name string, train func(context.Context, *algo.Runtime, *C) (algo.Model, error)) func(context.Context, *algo.Runtime, algo.Config) (algo.Model, error) {
	return func(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
		cfg, ok := any(c).(*C)
		if !ok || cfg == nil {
			return nil, fmt.Errorf("%w: %s: config is %T", algo.ErrConfig, name, c)
		}
		return train(ctx, rt, cfg)
	}
}

// Networks lists an actor-critic agent's networks (algo.Networker): the
// actor (obs → actorOut), critics Q(s, a) → 1, all of the hidden widths
// arch and trained with Adam, a target of every critic, and of the actor
// when actorTarget.
func Networks(obs, act env.Space, arch []int, actorOut, critics int, actorTarget bool) []algo.Network {
	actor := algo.Network{Name: "actor", In: obs.Dim(), Out: actorOut, Hidden: arch, Moments: 2, Acts: true}
	nets := []algo.Network{actor}
	if actorTarget {
		actor.Name, actor.Moments, actor.Acts = "actor target", 0, false
		nets = append(nets, actor)
	}
	for i := 1; i <= critics; i++ {
		q := algo.Network{Name: fmt.Sprintf("q%d", i), In: obs.Dim() + act.Dim(), Out: 1, Hidden: arch, Moments: 2}
		nets = append(nets, q)
		q.Name, q.Moments = q.Name+" target", 0
		nets = append(nets, q)
	}
	return nets
}
