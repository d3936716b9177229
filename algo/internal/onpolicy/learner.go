package onpolicy

import (
	"context"
	"fmt"

	"herd/algo"
	"herd/internal/rng"
	"herd/nn"
	"herd/sample"
	"herd/weights"
)

// Learner is what the learners of PPO and A2C share: the Agent being
// trained and its optimizer, the advantage buffers and the version count.
// Each algorithm embeds it and writes its own Learn: Begin, then its
// update on Adv and Returns. Not safe for concurrent use.
type Learner struct {
	Agent *Agent
	Opt   nn.Optimizer
	// Adv and Returns are the segment's GAE advantages and the critic's
	// targets Adv + Values, filled by Begin (T·N each, time-major).
	Adv, Returns []float32
	// Iterations is the number of Learn calls the run plans (steps over
	// num_envs × num_steps), the horizon of learning-rate annealing.
	Iterations int

	gamma, lambda float32
	n             uint64 // Learn calls so far: the version number
}

// NewLearner builds the learner of algorithm name for a run on spaces sp:
// the agent from the stream (h.Seed, name+"/init", 0), as NewPieces' policy,
// and opt.
func NewLearner(name string, h algo.Header, sp algo.Spaces, cfg AgentConfig, opt nn.Optimizer, iterations int, gamma, lambda float32) (*Learner, error) {
	agent, err := NewAgent(sp.Obs, sp.Act, cfg, rng.New(h.Seed, name+"/init", 0))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Learner{Agent: agent, Opt: opt, Iterations: iterations, gamma: gamma, lambda: lambda}, nil
}

// Begin starts one Learn call on seg: it checks that seg fits the agent
// (an error, never a panic, for a bad segment from another process),
// counts the call and computes Adv and Returns with GAE(γ, λ). It returns
// the iteration number, 1 for the first call.
func (l *Learner) Begin(ctx context.Context, seg *sample.Segment) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := seg.Check(); err != nil {
		return 0, err
	}
	a := l.Agent
	if seg.ObsDim != a.ObsDim || seg.ActDim != a.ActDim || seg.T < 1 || seg.N < 1 {
		return 0, fmt.Errorf("%w: segment %d×%d with obs %d, actions %d; the agent has obs %d, actions %d",
			sample.ErrShape, seg.T, seg.N, seg.ObsDim, seg.ActDim, a.ObsDim, a.ActDim)
	}
	if a.NActions > 0 {
		for k, v := range seg.Actions {
			if !(v >= 0 && v < float32(a.NActions)) || v != float32(int(v)) {
				return 0, fmt.Errorf("%w: segment action %d is %v, not an index below %d", sample.ErrShape, k, v, a.NActions)
			}
		}
	}
	tn := seg.T * seg.N
	l.Adv, l.Returns = grow(l.Adv, tn), grow(l.Returns, tn)
	GAE(l.Adv, seg.Rewards, seg.Values, seg.Dones, seg.LastValues, seg.N, l.gamma, l.lambda)
	ReturnsTo(l.Returns, l.Adv, seg.Values)
	l.n++
	return int(l.n), nil
}

// Weights returns the current parameters as version n, the number of
// Learn calls so far (0 before the first).
func (l *Learner) Weights() *weights.Version { return weights.New(l.n, l.Agent.Params()) }

// Model is the trained agent (algo.Model: Act and Save).
func (l *Learner) Model() algo.Model { return l.Agent }

// base lets TrainLocal find the Learner inside an algorithm's learner.
func (l *Learner) base() *Learner { return l }

// Close stops the agent's parallel worker (AgentConfig.Parallel); the
// learner stays usable on the caller's goroutine.
func (l *Learner) Close() error {
	l.Agent.Close()
	return nil
}
