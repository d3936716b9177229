package a2c

import (
	"context"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/nn"
	"herd/sample"
	"herd/weights"
)

// ComputeGradients computes A2C's gradient on seg at the weights v (nil:
// the learner's own) into g — the same advantages, loss and gradient-norm
// clip as Learn — and changes no parameter: the worker side of A3C
// (flow.ComputeGradients). It returns the loss scalars.
func (l *learner) ComputeGradients(ctx context.Context, seg *sample.Segment, v *weights.Version, g *algo.Grad) ([]algo.Stat, error) {
	if v != nil {
		if err := l.SetParams(v); err != nil {
			return nil, err
		}
	}
	if _, err := l.Begin(ctx, seg); err != nil {
		return nil, err
	}
	cfg, agent, loss := l.cfg, l.Agent, l.loss
	batchSize := seg.T * seg.N
	loss.returns = l.Returns
	loss.adv = append(loss.adv[:0], l.Adv...)
	if cfg.NormAdv {
		onpolicy.NormalizeTo(loss.adv, l.Adv)
	}
	agent.Reserve(batchSize)
	agent.Learn(seg.Obs, seg.Actions, batchSize, l.policyLoss, l.valueLoss)
	if cfg.MaxGradNorm > 0 {
		nn.ClipGradNorm(agent.Params(), cfg.MaxGradNorm)
	}
	if err := l.GradTo(g); err != nil {
		return nil, err
	}
	return []algo.Stat{
		{Name: "charts/learning_rate", Value: float64(l.Opt.LR())},
		{Name: "losses/value_loss", Value: loss.vLoss},
		{Name: "losses/policy_loss", Value: loss.pgLoss},
		{Name: "losses/entropy", Value: loss.entropy},
	}, nil
}

// ApplyGradients takes one optimizer step with g (a gradient computed by
// ComputeGradients, on any copy of the learner) and counts one update: the
// driver side of A3C (flow.ApplyGradients).
func (l *learner) ApplyGradients(g *algo.Grad) error {
	_, err := l.Apply(g)
	return err
}
