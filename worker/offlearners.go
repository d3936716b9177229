package worker

import (
	"context"
	"errors"
	"fmt"

	"herd/algo"
	"herd/sample"
	"herd/transport"
)

// The off-policy learners of a group (runtime.learners M > 1) are pal's
// sync learners spread over processes. Each keeps its own replay, fed by
// its own env workers, and learns in rounds: every learner takes one
// sample, the M samples advance the global env-step counter together, and
// each update the algorithm's schedule asks for over those steps is one
// collective step — every learner computes the update's gradient on its
// share of the minibatch (its own replay, its slot's stream), the M
// gradients are averaged in learner-id order and every learner applies
// the average once; an update in phases (algo.Phaser: an actor gradient
// after the critic step) is one such step per phase. So every learner holds the same parameters, and the
// updates, optimizer steps and target updates are those of one learner
// over the same env steps.

// offRound is what an off-policy learner tells the others each round.
type offRound struct {
	roundInfo
	// ReplayLen is the learner's replay size: an update is due only when
	// every replay holds its share of the minibatch.
	ReplayLen int
}

// minLenReplay is a replay whose Len is the group's smallest, so that
// every learner's Due agrees.
type minLenReplay struct {
	algo.Replay
	n int
}

func (r minLenReplay) Len() int { return r.n }

// runOffGroup is RunOffLearner for learner g.Slot of a group.
func runOffGroup(ctx context.Context, cfg OffLearnerConfig, g *LearnerGroup, l algo.TransitionLearner, rb algo.Replay,
	samples transport.SampleStream, params transport.ParamService, cnt *Counters) error {
	sl, ok := l.(algo.SplitLearner)
	if !ok {
		return fmt.Errorf("worker: learner %d: %w", g.Slot, errNotSplit)
	}
	sl.SetSlot(g.Slot)
	lead := g.Slot == 0
	own := &Counters{}
	if !lead {
		cnt = own
	}
	var (
		published = l.Weights().N
		step      int64
		round     int // rounds exchanged
		next      = published + 1
		tickets   []algo.Ticket
		grad      = sl.NewGrad()
		ex        = newGradExchange(g, sl.NewGrad)
		per       = cfg.StepsPerSample * int64(g.Learners)
	)
	if lead {
		if err := params.Publish(ctx, l.Weights()); err != nil {
			return err
		}
	}
	for step < cfg.Steps {
		b, err := pull(ctx, samples, cfg.Stall, cfg.Alive)
		if err != nil {
			return err
		}
		tr, err := sample.DecodeTransitions(b)
		if err == nil {
			err = rb.Add(tr)
		}
		if err != nil {
			own.DecodeErrors++
			if cfg.OnDrop != nil {
				cfg.OnDrop(err)
			}
			continue
		}
		own.Learned++
		own.addLag(published, tr.Version, tr.N)
		ss := samples.Stats()
		infos, err := exchangeOff(ctx, g.Collective, offRound{roundInfo: roundInfo{T: 1, N: tr.N, Episodes: tr.Episodes, Counters: *own,
			Duplicates: ss.Duplicates, StreamErrors: ss.Malformed + ss.WrongProtocol, Params: paramsHash(round, l.Weights)}, ReplayLen: rb.Len()})
		if err != nil {
			return fmt.Errorf("worker: learner %d: %w", g.Slot, err)
		}
		round++
		minLen, ris := infos[0].ReplayLen, make([]roundInfo, len(infos))
		for k, in := range infos {
			minLen = min(minLen, in.ReplayLen)
			ris[k] = in.roundInfo
		}
		if err := checkParams(ris); err != nil {
			return fmt.Errorf("worker: learner %d: %w", g.Slot, err)
		}
		var report *sample.Segment
		if lead {
			report = mergeRound(ris, cnt)
		}
		prev := step
		step = min(step+per, cfg.Steps)
		due := minLenReplay{rb, minLen}
		tickets = sl.Due(tickets[:0], due, prev, step, next)
		next += uint64(len(tickets))
		var stats []algo.Stat
		for _, t := range tickets {
			// Phase by phase (algo.Phaser): every learner applies the
			// average of one phase before it computes the next.
			for t.Phase = 0; t.Phase < algo.Phases(sl, t); t.Phase++ {
				if err := sl.Grad(ctx, rb, t, grad); err != nil {
					return fmt.Errorf("worker: learner %d: %w", g.Slot, err)
				}
				avg, err := ex.average(ctx, grad)
				if err != nil {
					return fmt.Errorf("worker: learner %d: %w", g.Slot, err)
				}
				if stats, err = sl.Apply(avg); err != nil {
					return fmt.Errorf("worker: learner %d: %w", g.Slot, err)
				}
			}
		}
		if a, ok := sl.(algo.Advancer); ok {
			if err := a.Advance(due, prev, step); err != nil {
				return fmt.Errorf("worker: learner %d: %w", g.Slot, err)
			}
		}
		// Every learner makes the same decision; only learner 0 acts on it.
		if v := l.Weights(); v.N >= published+uint64(cfg.PublishEvery) {
			if lead {
				if err := params.Publish(ctx, v); err != nil {
					return err
				}
			}
			published = v.N
		}
		if lead && cfg.OnSample != nil {
			cfg.OnSample(step, &sample.Transitions{N: report.N, Episodes: report.Episodes}, stats)
		}
	}
	return nil
}

// errNotSplit is returned for runtime.learners > 1 with an off-policy
// learner that cannot split its updates into gradient and apply steps.
var errNotSplit = errors.New("the algorithm's learner cannot split its updates into gradient and apply steps (runtime.learners > 1)")

// exchangeOff gathers every learner's offRound for this round.
func exchangeOff(ctx context.Context, c transport.Collective, own offRound) ([]offRound, error) {
	return gatherJSON(ctx, c, own)
}

// gradExchange averages one update's gradients over the group: each
// learner sends its gradient (ticket, parts with their counts, scalars),
// receives all M and averages them itself in learner-id order
// (gradWire.average, the bits of algo.AverageGrads, as pal's sync rounds
// do), so all apply the same bits.
type gradExchange struct {
	c    transport.Collective
	wire gradWire
	avg  *algo.Grad
}

func newGradExchange(g *LearnerGroup, newGrad func() *algo.Grad) *gradExchange {
	return &gradExchange{c: g.Collective, wire: g.wire(), avg: newGrad()}
}

// average returns the group's average of g, as one update (N 1, each
// part carried once); it is valid until the next call.
func (x *gradExchange) average(ctx context.Context, g *algo.Grad) (*algo.Grad, error) {
	if err := x.wire.exchange(ctx, x.c, x.avg, g); err != nil {
		return nil, err
	}
	return x.avg, nil
}
