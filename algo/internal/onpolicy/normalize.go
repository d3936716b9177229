package onpolicy

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"herd/internal/scratch"
	"herd/nn"
	"herd/sample"
)

// Observation and reward normalization follow SB3's VecNormalize (the
// rl-zoo's `normalize: true`) with its defaults: clip_obs = clip_reward
// = 10, ε = 1e-8, and RunningMeanStd's statistics starting from mean 0,
// variance 1 and count 1e-4. Their statistics are parameters that no
// gradient moves ("obs_rms", "ret_rms"), so the weights a policy acts
// with and a checkpoint carry them. The learner folds a segment into them
// after its update (Learner.Fold); within a segment they stay as the
// acting weights had them, where VecNormalize folds each step as it comes
// (docs/guide/recurrent.md).

const (
	rmsEpsCount = 1e-4 // RunningMeanStd's initial count
	normEps     = 1e-8 // VecNormalize's epsilon
	normClip    = 10   // clip_obs and clip_reward
)

// rmsUpdate folds n rows of d values (x, row-major) into the running
// statistics st = [count, mean (d), var (d)], SB3's
// RunningMeanStd.update_from_moments (Chan et al.'s parallel algorithm)
// with the batch's mean and population variance:
//
//	δ = μ_b − μ,  N = n_a + n_b,  μ' = μ + δ·n_b/N
//	σ'² = (σ²·n_a + σ_b²·n_b + δ²·n_a·n_b/N) / N,  n' = N
//
// Folding batches one after another equals folding their union (up to
// rounding), which is why a segment can be folded at once.
func rmsUpdate(st []float32, d int, x []float32, n int) {
	if n == 0 {
		return
	}
	na, nb := float64(st[0]), float64(n)
	tot := na + nb
	mean, vr := st[1:1+d], st[1+d:1+2*d]
	for j := range d {
		var s float64
		for r := range n {
			s += float64(x[r*d+j])
		}
		bm := s / nb
		var ss float64
		for r := range n {
			e := float64(x[r*d+j]) - bm
			ss += e * e
		}
		bv := ss / nb
		delta := bm - float64(mean[j])
		m2 := float64(vr[j])*na + bv*nb + delta*delta*na*nb/tot
		mean[j] = float32(float64(mean[j]) + delta*nb/tot)
		vr[j] = float32(m2 / tot)
	}
	st[0] = float32(tot)
}

func newRMS(name string, d int) *nn.Param {
	p := nn.NewParam(name, 1+2*d)
	p.Value[0] = rmsEpsCount
	for j := range d {
		p.Value[1+d+j] = 1
	}
	return p
}

// ObsNorm is VecNormalize's observation normalization, applied where an
// observation enters the agent's networks:
//
//	x̃ = clip((x − μ)/√(σ² + ε), −10, 10)
//
// per observation value, μ and σ² the running statistics of the
// observations the learner has folded.
type ObsNorm struct {
	p *nn.Param
	d int
}

func newObsNorm(d int) *ObsNorm { return &ObsNorm{p: newRMS("obs_rms", d), d: d} }

// to writes the n normalized rows of obs into *buf and returns them; a nil
// ObsNorm returns obs.
func (o *ObsNorm) to(buf *[]float32, obs []float32, n int) []float32 {
	if o == nil {
		return obs
	}
	d := o.d
	*buf = scratch.Resize(*buf, n*d)
	out := *buf
	mean, vr := o.p.Value[1:1+d], o.p.Value[1+d:1+2*d]
	for j := range d {
		inv := 1 / math.Sqrt(float64(vr[j])+normEps)
		for r := range n {
			v := (float64(obs[r*d+j]) - float64(mean[j])) * inv
			out[r*d+j] = float32(min(max(v, -normClip), normClip))
		}
	}
	return out
}

// Update folds n observation rows into the statistics.
func (o *ObsNorm) Update(obs []float32, n int) { rmsUpdate(o.p.Value, o.d, obs, n) }

// RewardNorm is VecNormalize's reward normalization: rewards are divided
// by √(σ_R² + ε), σ_R² the running variance of each env's discounted
// return R ← γ·R + r (zeroed after each episode's end). herd applies it
// as a scale of the critic: the critic learns targets in the normalized
// units and its outputs are multiplied by the scale wherever a value
// leaves the agent (policy rows, bootstraps), so that GAE on raw rewards
// and raw values, divided by the scale, is GAE on normalized rewards and
// the critic's outputs — VecNormalize's advantages and targets, with the
// truncation bootstrap γ·V added to the normalized reward as SB3's
// collect_rollouts adds it. VecNormalize's clip of the normalized reward
// at ±10 is not applied.
type RewardNorm struct {
	p *nn.Param // [count, mean, var] of the discounted returns
	// ret is each env's discounted return so far, per env worker
	// (seg.Worker): the learner's own state, saved by the algorithm.
	ret map[int][]float32
}

func newRewardNorm() *RewardNorm {
	return &RewardNorm{p: newRMS("ret_rms", 1), ret: map[int][]float32{}}
}

// Scale is √(σ_R² + ε), what a normalized reward is multiplied by to be
// raw.
func (n *RewardNorm) Scale() float32 {
	return float32(math.Sqrt(float64(n.p.Value[2]) + normEps))
}

// MeanStd is the critic's normalization (0, Scale): the value loss takes
// targets to the critic's units with it.
func (n *RewardNorm) MeanStd() (mean, std float32) { return 0, n.Scale() }

// Update folds a segment's rewards into the statistics step by step, as
// VecNormalize's _update_reward does per env step: for each step t, every
// env's return R ← γ·R + r_t, the N returns folded as one batch, then R
// zeroed where the step ended an episode.
func (n *RewardNorm) Update(seg *sample.Segment, gamma float32) {
	ret := n.ret[seg.Worker]
	if len(ret) != seg.N {
		ret = make([]float32, seg.N)
		n.ret[seg.Worker] = ret
	}
	for t := range seg.T {
		row := t * seg.N
		for e := range seg.N {
			ret[e] = ret[e]*gamma + seg.Rewards[row+e]
		}
		rmsUpdate(n.p.Value, 1, ret, seg.N)
		for e := range seg.N {
			if seg.Dones[row+e] != 0 {
				ret[e] = 0
			}
		}
	}
}

// MarshalBinary saves the running returns (the statistics are a
// parameter): per env worker in increasing id, its id, its env count and
// the returns.
func (n *RewardNorm) MarshalBinary() []byte {
	ids := make([]int, 0, len(n.ret))
	for id := range n.ret {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(ids)))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, uint64(int64(id)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(n.ret[id])))
		for _, v := range n.ret[id] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// UnmarshalBinary restores what MarshalBinary saved.
func (n *RewardNorm) UnmarshalBinary(b []byte) error {
	bad := fmt.Errorf("reward normalization state of %d bytes is malformed", len(b))
	if len(b) < 4 {
		return bad
	}
	k := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	ret := map[int][]float32{}
	for range k {
		if len(b) < 12 {
			return bad
		}
		id := int(int64(binary.LittleEndian.Uint64(b)))
		m := int(binary.LittleEndian.Uint32(b[8:]))
		b = b[12:]
		if m < 0 || len(b) < 4*m {
			return bad
		}
		r := make([]float32, m)
		for i := range r {
			r[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		ret[id], b = r, b[4*m:]
	}
	if len(b) != 0 {
		return bad
	}
	n.ret = ret
	return nil
}
