package offpolicy

import "herd/nn"

// TwinQFit takes one optimizer step on the twin critics' regression onto a
// shared target y (clipped double-Q learning, Fujimoto et al. 2018; SAC,
// Haarnoja et al. 2018):
//
//	L = MSE(Q1(s, a), y) + MSE(Q2(s, a), y)
//
// qParams is Q1's parameters then Q2's (one Adam over both, as CleanRL);
// dQ and q1 are B-long workspaces. It returns L and the batch means of Q1
// and Q2, which the algorithms log.
func TwinQFit(qf1, qf2 *nn.Critic, opt *nn.Adam, qParams []*nn.Param, obs, action, y []float32, B int,
	dQ, q1 []float32) (loss, q1Mean, q2Mean float64) {
	qf1.ZeroGrad()
	qf2.ZeroGrad()
	q := qf1.Forward(obs, action, B)
	l1 := nn.MSE(dQ, q, y)
	copy(q1, q) // kept for the log: Backward may reuse the output buffer
	qf1.Backward(dQ)
	q2 := qf2.Forward(obs, action, B)
	l2 := nn.MSE(dQ, q2, y)
	qf2.Backward(dQ)
	opt.Step(qParams)
	return float64(l1 + l2), Mean(q1), Mean(q2)
}

// DPGStep takes one deterministic policy gradient step (Silver et al. 2014;
// DDPG, Lillicrap et al. 2016; TD3's actor) on
//
//	L = −E[Q(s, μ(s))],   dL/dQ = −1/B per row,
//
// back through the critic to dQ/da, the tanh head and the actor. It also
// adds into the critic's gradients, which are zeroed before the critic's
// next step. pi and dOut (B×dim(A)) and dQ (B) are workspaces. It returns L.
func DPGStep(actor *nn.MLP, head *nn.TanhActor, critic *nn.Critic, opt *nn.Adam, obs []float32, B int,
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
	opt.Step(actor.Params())
	return loss
}
