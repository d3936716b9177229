package offpolicy

import "herd/nn"

// DPGStep takes one deterministic policy gradient step (Silver et al. 2014;
// DDPG, Lillicrap et al. 2016; TD3's actor): DPGGrad, then opt's step on
// the actor. It returns the loss.
func DPGStep(actor *nn.MLP, head *nn.TanhActor, critic *nn.Critic, opt *nn.Adam, obs []float32, B int,
	pi, dOut, dQ []float32) float64 {
	loss := DPGGrad(actor, head, critic, obs, B, pi, dOut, dQ)
	opt.Step(actor.Params())
	return loss
}

// DPGGrad sets the actor's gradients for
//
//	L = −E[Q(s, μ(s))],   dL/dQ = −1/B per row,
//
// back through the critic to dQ/da, the tanh head (into dOut, dL/d(actor
// output)) and the actor, and returns L. It also adds into the critic's
// gradients, which are zeroed before the critic's next step. pi and dOut
// (B×dim(A)) and dQ (B) are workspaces.
func DPGGrad(actor *nn.MLP, head *nn.TanhActor, critic *nn.Critic, obs []float32, B int,
	pi, dOut, dQ []float32) float64 {
	out := actor.Forward(obs, B)
	head.ActionTo(pi, out)
	loss := -Mean(critic.Forward(obs, pi, B))
	for i := range B {
		dQ[i] = -1 / float32(B)
	}
	head.Backward(dOut, out, critic.Backward(dQ))
	actor.ZeroGrad()
	actor.Backward(dOut)
	return loss
}
