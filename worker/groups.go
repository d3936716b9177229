package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"herd/transport"
)

// ErrGroups is returned for a runtime.env_groups that does not split an
// env worker's envs into equal groups.
var ErrGroups = errors.New("worker: bad env groups")

// CheckGroups reports whether g groups (0 or 1: one) split m envs into
// equal blocks of at least one env.
func CheckGroups(g, m int) error {
	switch {
	case g < 0:
		return fmt.Errorf("%w: runtime.env_groups must be ≥ 1, got %d", ErrGroups, g)
	case g > 1 && (g > m || m%g != 0):
		return fmt.Errorf("%w: runtime.env_groups %d must divide the %d envs of an env worker (num_envs) into equal groups", ErrGroups, g, m)
	}
	return nil
}

// envGroup is one block of an env worker's envs with its own inference
// request and goroutine: send hands the request to the goroutine and recv
// waits for its answer, so the caller steps other groups meanwhile.
type envGroup struct {
	req   *transport.InferRequest
	start chan struct{}
	done  chan error
	ctx   context.Context // ends the group's goroutine
}

// send starts the request for the group's observations obs.
func (g *envGroup) send(obs []float32) {
	g.req.Obs = obs
	g.start <- struct{}{}
}

// recv returns the group's outputs and the weights version that made them.
func (g *envGroup) recv() ([]float32, uint64, error) {
	select {
	case err := <-g.done:
		return g.req.Out, g.req.WeightsVersion, err
	case <-g.ctx.Done():
		// The goroutine may have stopped before taking the request.
		return nil, 0, g.ctx.Err()
	}
}

// startGroups gives each of cfg.Groups groups of k envs a goroutine with a
// request and a call timer of its own, ended by stop; one group (G ≤ 1)
// gets none: its requests are made on the env worker's goroutine.
//
// With a fixed weights version (every reply from the same version, as in a
// synchronous schedule) the segments are bit for bit those of one group:
// the policy's forward pass gives a row the same outputs in any batch, the
// sampler draws row by row from one stream and the groups are sampled in
// order (rollout.NewBlockSegments), and each env's steps, resets and
// truncation bootstraps are unchanged. Under asynchrony the groups'
// requests of one step may be answered by different versions: a step then
// records the oldest (Segment.Versions), so the lag the learner counts is
// never understated, and the actions differ from one group's as the
// weights do; sample ids, env seeds, random streams and every count are
// unchanged.
func startGroups(ctx context.Context, cfg EnvConfig, inf transport.InferenceStream, k int) ([]*envGroup, func()) {
	if cfg.Groups <= 1 {
		return nil, func() {}
	}
	gctx, cancel := context.WithCancel(ctx)
	to := cfg.Timeouts.withDefaults()
	var wg sync.WaitGroup
	gs := make([]*envGroup, cfg.Groups)
	for i := range gs {
		g := &envGroup{req: &transport.InferRequest{Worker: cfg.Slot, Rows: k},
			start: make(chan struct{}, 1), done: make(chan error, 1), ctx: gctx}
		gs[i] = g
		ct := newCallTimer(gctx, to.Infer)
		wg.Go(func() {
			defer ct.stop()
			for {
				select {
				case <-g.start:
				case <-gctx.Done():
					return
				}
				g.req.WeightsVersion = math.MaxUint64
				g.done <- retry(ct, func(c context.Context) error { return inf.Infer(c, g.req) })
			}
		})
	}
	return gs, func() { cancel(); wg.Wait() }
}
