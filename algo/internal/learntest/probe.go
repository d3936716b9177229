package learntest

import (
	"context"
	"fmt"
	"testing"

	"herd/algo"
)

// Probe trains the run of a config file body (against spec alone) with
// seeds 1…seeds on one of the probe envs (Probe/Bandit-v0,
// Probe/Corridor-v0: herd/env/probe), where the optimal policy's return is
// 1 in every episode, and checks that the algorithm learned it from every
// seed: the greedy policy returns 1 in each of 20 evaluation episodes, and
// the mean return of the last 100 training episodes — those of the
// sampling policy — is at least minTrain. A uniformly random policy
// returns 1/4 on the bandit and about 1/3 on the corridor, and an
// untrained greedy policy (a fixed action per observation) is optimal
// with chance 1/256 and 1/32, so a minTrain well above those and the
// greedy check exclude chance; several seeds make a broken algorithm that
// is lucky once still fail.
func Probe(t *testing.T, spec algo.Spec, file string, seeds int, minTrain float64) {
	t.Helper()
	res := Resolve(t, spec, file)
	for seed := range uint64(seeds) {
		h := res.Header
		h.Seed = seed + 1
		tee := &Tee{Next: algo.Discard()}
		m, err := spec.Train(context.Background(), &algo.Runtime{Header: h, Log: tee}, res.Config)
		if err != nil {
			t.Fatal(err)
		}
		greedy := Eval(t, m, h.Env, 7, 20)
		train := tee.LastMean(100)
		t.Logf("%s on %s, seed %d, after %d steps: greedy return %.3f, last 100 training episodes %.3f (%d episodes)",
			spec.Name, h.Env, h.Seed, h.Steps, greedy, train, len(tee.Returns))
		if greedy != 1 || len(tee.Returns) < 100 || !(train >= minTrain) {
			t.Errorf("%s did not learn %s from seed %d: greedy return %.3f (want 1), last 100 of %d training episodes %.3f (want ≥ %.2f)",
				spec.Name, h.Env, h.Seed, greedy, len(tee.Returns), train, minTrain)
		}
	}
}

// ProbeSegments runs Probe as one subtest per segment length: the bandit
// at T = 2 and the corridor at T = 1 (every return is r + γ·V(x'), so
// only the bootstrap carries the credit back) and at corridorT (n-step
// returns). file is a format of the env id and T; every case trains
// three seeds and needs a training mean of 0.8.
func ProbeSegments(t *testing.T, spec algo.Spec, file string, corridorT int) {
	t.Helper()
	for _, c := range []struct {
		env string
		T   int
	}{{"Probe/Bandit-v0", 2}, {"Probe/Corridor-v0", 1}, {"Probe/Corridor-v0", corridorT}} {
		t.Run(fmt.Sprintf("%s/T=%d", c.env, c.T), func(t *testing.T) {
			Probe(t, spec, fmt.Sprintf(file, c.env, c.T), 3, 0.8)
		})
	}
}
