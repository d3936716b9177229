package offpolicy

import (
	"fmt"

	"herd/env"
	"herd/nn"
)

// Named is one network's parameters under a checkpoint prefix, e.g. the
// actor's "0.weight" stored as "actor.0.weight".
type Named struct {
	Prefix string
	Params []*nn.Param
}

// prefixed returns shallow copies of every parameter renamed Prefix+"."+Name;
// the copies share Value, so Load fills the networks' own slices.
func prefixed(nets []Named) []*nn.Param {
	var out []*nn.Param
	for _, n := range nets {
		for _, p := range n.Params {
			q := *p
			q.Name = n.Prefix + "." + p.Name
			out = append(out, &q)
		}
	}
	return out
}

// Save writes several networks into one safetensors file, each parameter
// under its network's prefix (actor.0.weight, qf1.0.weight, …), so that an
// actor-critic checkpoint keeps every network apart.
func Save(path string, nets []Named, metadata map[string]string) error {
	return nn.SaveFile(path, prefixed(nets), metadata)
}

// Params returns the parameters of nets as Save names them; they share
// Value and Grad with the networks (for algo.ParamModel).
func Params(nets []Named) []*nn.Param { return prefixed(nets) }

// Load reads the networks written by Save back into nets' parameters.
func Load(path string, nets []Named) error {
	_, err := nn.LoadFile(path, prefixed(nets))
	return err
}

// BoxBounds returns the bounds of a continuous action space, or an error
// naming the env when the space is not a bounded Box (the tanh-squashed
// actors of SAC, TD3 and DDPG need finite bounds).
func BoxBounds(id string, s env.Space) (low, high []float32, err error) {
	b, ok := s.(env.Box)
	if !ok {
		return nil, nil, fmt.Errorf("env %s has action space %v; want a Box", id, s)
	}
	for i := range b.Low {
		if !(b.Low[i] > -1e30 && b.High[i] < 1e30 && b.Low[i] < b.High[i]) {
			return nil, nil, fmt.Errorf("env %s action bounds [%v, %v] at %d are not finite", id, b.Low[i], b.High[i], i)
		}
	}
	return b.Low, b.High, nil
}
