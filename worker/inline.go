package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd/algo"
	"herd/transport"
)

// inlineCopy is an env worker's own policy copy, kept from the parameter
// service: the off-policy env workers' (RunOffEnv) and the on-policy ones'
// under inline inference (RunEnvInline). Acting with a copy costs a small
// MLP's forward pass per step instead of an inference round trip (four
// NATS message hops, far more CPU than the forward pass), and no policy
// worker.
type inlineCopy struct {
	slot   int
	pol    algo.PolicyNet
	car    *carrier // runs pol on rows with their envs' states
	params transport.ParamService
}

// newInlineCopy builds the copy and waits for the learner's first weights
// (version 0 or newer), so a worker never acts on weights the learner
// does not hold.
func newInlineCopy(ctx context.Context, slot int, pieces *algo.Pieces, params transport.ParamService) (*inlineCopy, error) {
	pol, err := pieces.NewPolicy()
	if err != nil {
		return nil, err
	}
	c := &inlineCopy{slot: slot, pol: pol, car: newCarrier(pol), params: params}
	v, err := params.Wait(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("worker: env worker %d: first weights: %w", slot, err)
	}
	if err := pol.SetWeights(v); err != nil {
		return nil, fmt.Errorf("worker: env worker %d: weights %d: %w", slot, v.N, err)
	}
	return c, nil
}

// refresh takes the newest version the parameter service holds, if it is
// not the copy's. It never blocks: the service fetches versions in the
// background, and acting on the one before is the price of not waiting.
func (c *inlineCopy) refresh() error {
	if v := c.params.Latest(); v != nil && v.N != c.pol.Version() {
		if err := c.pol.SetWeights(v); err != nil {
			return fmt.Errorf("worker: env worker %d: weights %d: %w", c.slot, v.N, err)
		}
	}
	return nil
}

// await waits until the parameter service holds version n or newer, for
// at most d. It reports false with a nil error when d ran out first.
func (c *inlineCopy) await(ctx context.Context, n uint64, d time.Duration) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := c.params.Wait(wctx, n)
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return false, nil
	}
	return false, fmt.Errorf("worker: env worker %d: waiting for weights %d: %w", c.slot, n, err)
}

// known is the number of the newest version the parameter service knows
// of, held or still downloading: the learner announces a version before it
// takes the next segment, while the download may take longer than the
// push's acknowledgement (NATS).
func (c *inlineCopy) known() uint64 { return max(c.params.Announced(), c.pol.Version()) }

// version is the number of the weights the copy holds.
func (c *inlineCopy) version() uint64 { return c.pol.Version() }

// infer answers r as a policy worker would (Out and WeightsVersion), with
// the copy: the on-policy env worker's inference under inline mode. A
// recurrent policy's states travel in r as they do to a policy worker, so
// the copy, like a policy worker, keeps none.
func (c *inlineCopy) infer(r *transport.InferRequest) {
	r.Out = c.car.forward(r.Out, r.Obs, r.Rows)
	r.WeightsVersion = c.pol.Version()
}
