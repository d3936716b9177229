package worker

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"herd/algo"
	"herd/sample"
	"herd/transport"
	"herd/weights"
)

// LearnerGroup makes a learner one of the M data-parallel learners of a
// run (runtime.learners): each pulls its own samples (its own queue, fed
// by its env workers), one update of the algorithm is one segment per
// learner, every gradient is averaged over the learners through
// Collective, and all apply the same steps, so their parameters stay
// identical. Learner 0 alone publishes weights and reports (OnIteration
// sees every learner's episodes and counters).
type LearnerGroup struct {
	Collective transport.Collective
	// Learners is M, Slot this learner's id (0 … M−1).
	Learners, Slot int
	// SharedMin is the least number of a model's values for which
	// learners whose Collective is a transport.Sharer (one process)
	// average in place rather than through messages; 0 means
	// DefaultSharedMin. Both give the same bits.
	SharedMin int
}

// wire returns a gradWire for g's exchanges.
func (g *LearnerGroup) wire() gradWire {
	n := g.SharedMin
	if n == 0 {
		n = DefaultSharedMin
	}
	return gradWire{sharedMin: n}
}

// reducer is algo.Reducer over a transport.Collective: every learner
// sends its values, receives all M and combines them itself in learner-id
// order (gradWire.average for gradients, the bits of algo.AverageGrads),
// so all get the same bits.
type reducer struct {
	c    transport.Collective
	m    int
	wire gradWire
}

// NewReducer returns the algo.Reducer of g's learners over g.Collective.
func NewReducer(g *LearnerGroup) algo.Reducer {
	return &reducer{c: g.Collective, m: g.Learners, wire: g.wire()}
}

func (r *reducer) Learners() int { return r.m }

// AverageGrad gathers every learner's g (its parts with the counts of the
// gradients carrying each) and replaces g by their average in learner-id
// order.
func (r *reducer) AverageGrad(ctx context.Context, g *algo.Grad) error {
	return r.wire.exchange(ctx, r.c, g, g)
}

// Sum gathers every learner's x and adds them in learner-id order.
func (r *reducer) Sum(ctx context.Context, x []float64) error {
	b := make([]byte, 0, 8*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	all, err := r.c.AllGather(ctx, b)
	if err != nil {
		return err
	}
	for k, m := range all {
		if len(m) != 8*len(x) {
			return fmt.Errorf("%w: learner %d sent %d bytes for a sum of %d values", algo.ErrGradShape, k, len(m), len(x))
		}
	}
	for i := range x {
		s := 0.0
		for _, m := range all {
			s += math.Float64frombits(binary.LittleEndian.Uint64(m[8*i:]))
		}
		x[i] = s
	}
	return nil
}

// roundInfo is what a learner tells the others at the start of each update:
// the shape and episodes of its segment and its own counters, so that
// learner 0 reports the whole run.
type roundInfo struct {
	T, N     int
	Episodes []sample.Episode
	Counters Counters
	// Duplicates and StreamErrors are its sample stream's counts
	// (Stats.Duplicates; Malformed + WrongProtocol).
	Duplicates, StreamErrors uint64
	// Params is the hash of its parameters (weights.Version.Hash) every
	// paramsCheckEvery rounds, nil in the others.
	Params *uint64 `json:",omitempty"`
}

// paramsCheckEvery is how many rounds apart the learners of a group
// compare their parameters' hashes: a learner whose parameters drifted
// from the others' (a reduction that is not the same everywhere, a lost or
// corrupted gradient) ends the run within that many updates instead of
// training on.
const paramsCheckEvery = 16

// paramsHash is what a learner sends as roundInfo.Params in round it.
func paramsHash(it int, v func() *weights.Version) *uint64 {
	if it%paramsCheckEvery != 0 {
		return nil
	}
	h := v().Hash()
	return &h
}

// checkParams compares the group's parameter hashes of one round, when
// the round carries them.
func checkParams(infos []roundInfo) error {
	h := infos[0].Params
	if h == nil {
		return nil
	}
	for k, in := range infos[1:] {
		if in.Params == nil || *in.Params != *h {
			got := "none"
			if in.Params != nil {
				got = fmt.Sprintf("%016x", *in.Params)
			}
			return fmt.Errorf("%w: the learners' parameters differ: learner 0's hash %016x, learner %d's %s", ErrParamsDiffer, *h, k+1, got)
		}
	}
	return nil
}

// ErrParamsDiffer marks a learner group whose members' parameters are no
// longer identical.
var ErrParamsDiffer = errors.New("worker: learner group")

// exchangeRound gathers every learner's roundInfo for this update.
func exchangeRound(ctx context.Context, c transport.Collective, own roundInfo) ([]roundInfo, error) {
	return gatherJSON(ctx, c, own)
}

// gatherJSON gathers every learner's own, as JSON, in learner-id order.
func gatherJSON[T any](ctx context.Context, c transport.Collective, own T) ([]T, error) {
	b, err := json.Marshal(own)
	if err != nil {
		return nil, err
	}
	all, err := c.AllGather(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(all))
	for k, m := range all {
		if err := json.Unmarshal(m, &out[k]); err != nil {
			return nil, fmt.Errorf("%w: learner %d's round: %w", transport.ErrMalformed, k, err)
		}
	}
	return out, nil
}

// mergeRound is the segment learner 0 reports for one update: every
// learner's episodes, in learner-id order, on a segment of all their envs
// (T × ΣN; an episode's At stays its time index), and the run's counters:
// the sum of the learners' own.
func mergeRound(infos []roundInfo, cnt *Counters) *sample.Segment {
	seg := &sample.Segment{T: infos[0].T}
	var sum Counters
	for _, in := range infos {
		seg.N += in.N
		seg.Episodes = append(seg.Episodes, in.Episodes...)
		c := in.Counters
		sum.Learned += c.Learned
		sum.Dropped += c.Dropped
		sum.DecodeErrors += c.DecodeErrors
		sum.LagSum += c.LagSum
		sum.LagSteps += c.LagSteps
		sum.LagMax = max(sum.LagMax, c.LagMax)
	}
	for _, in := range infos[1:] {
		sum.PeerDuplicates += in.Duplicates
		sum.PeerStreamErrors += in.StreamErrors
	}
	sum.ParamChecks = cnt.ParamChecks
	if infos[0].Params != nil {
		sum.ParamChecks++
	}
	*cnt = sum
	return seg
}

// errNotDataParallel is returned for runtime.learners > 1 with an
// algorithm whose learner cannot share its updates.
var errNotDataParallel = errors.New("worker: the algorithm's learner cannot learn data-parallel (it is no algo.DataParallel, as runtime.learners > 1 needs)")
