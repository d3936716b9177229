package nn_test

import (
	"fmt"

	"herd/internal/rng"
	"herd/nn"
)

// A policy-gradient step on a tiny categorical policy: forward, head
// log-probabilities, the loss gradient, backward, clip, Adam.
func Example() {
	const obsDim, nActions, B = 4, 2, 8
	r := rng.New(1, "example/init", 0)
	policy, err := nn.NewMLP(nn.MLPConfig{In: obsDim, Hidden: []int{16, 16}, Out: nActions,
		Act: nn.Tanh, Init: nn.Init{Kind: nn.InitOrthogonal, OutGain: 0.01}}, r)
	if err != nil {
		panic(err)
	}
	opt, err := nn.NewAdam(nn.AdamConfig{LR: 1e-2, Eps: 1e-5})
	if err != nil {
		panic(err)
	}
	head := nn.Categorical{N: nActions}

	obs := make([]float32, B*obsDim)
	actions := make([]int, B)
	adv := make([]float32, B)
	for i := range obs {
		obs[i] = float32(r.NormFloat64())
	}
	for i := range actions {
		actions[i] = i % nActions
		adv[i] = 1 - 2*float32(i%nActions) // action 0 is good, action 1 bad
	}
	logProb := make([]float32, B)
	dLogProb := make([]float32, B)
	dLogits := make([]float32, B*nActions)

	mean := func() float32 {
		logits := policy.Forward(obs, B)
		head.LogProbTo(logProb, logits, actions)
		var s float32
		for i := range logProb {
			s += adv[i] * logProb[i]
		}
		return s / B
	}
	before := mean()
	for range 50 {
		logits := policy.Forward(obs, B)
		// L = −mean(adv · log π(a|s))  ⇒  dL/dlog π = −adv/B
		for i := range dLogProb {
			dLogProb[i] = -adv[i] / B
		}
		head.Backward(dLogits, logits, actions, dLogProb, nil)
		policy.ZeroGrad()
		policy.Backward(dLogits)
		nn.ClipGradNorm(policy.Params(), 0.5)
		opt.Step(policy.Params())
	}
	fmt.Println("objective improved:", mean() > before)
	// Output: objective improved: true
}

// A continuous-control critic step: Q(s, a) regression to a target, and
// the action gradient that DDPG/TD3 feed back into the actor.
func ExampleCritic() {
	const obsDim, actDim, B = 3, 1, 4
	r := rng.New(1, "example/critic", 0)
	q, err := nn.NewCritic(obsDim, actDim, nn.MLPConfig{Hidden: []int{32, 32}}, r)
	if err != nil {
		panic(err)
	}
	target := q.Clone()
	obs := make([]float32, B*obsDim)
	act := make([]float32, B*actDim)
	tdTarget := []float32{1, 0, -1, 0.5}
	dQ := make([]float32, B)

	qv := q.Forward(obs, act, B)
	loss := nn.MSE(dQ, qv, tdTarget)
	q.ZeroGrad()
	dAct := q.Backward(dQ) // dL/da, B×actDim
	_ = nn.PolyakUpdate(target.Params(), q.Params(), 0.005)
	fmt.Println(loss > 0, len(dAct))
	// Output: true 4
}
