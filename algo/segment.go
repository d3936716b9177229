package algo

import (
	"fmt"

	"herd/env"
	"herd/sample"
)

// SegmentWorker is the env worker of the on-policy algorithms (PPO, A2C) in
// its simplest form, with the policy inline: it steps a vector of envs with
// a PolicyNet and a Sampler and fills sample.Segments. The local executor
// runs one; the other executors run one per env worker, each with its own
// sampler stream. Not safe for concurrent use.
//
// Per step t it copies the observations into the segment, runs the policy
// on them, samples, steps the envs with the env actions and records
// rewards and dones. The policy's outputs must end each row with V(s),
// which the sampler copies into Acts.Values and the worker reads for the
// two bootstraps:
//
//   - truncation: when env i's episode was cut by a time limit (truncated,
//     not terminated), the envs have already reset it, so its reward
//     becomes r + γ·V(final observation) (Pardo et al. 2018, "Time Limits
//     in Reinforcement Learning"); Dones marks the step, so GAE does not
//     look across the reset. A terminated episode gets no bootstrap.
//   - the segment's end: NextObs holds the observations after the last
//     step and LastValues = V(NextObs).
//
// A policy that can compute V(s) alone, cheaper than whole rows, has a
// method ValuesTo(dst, obs []float32, n int) []float32 (onpolicy's: the
// critic only); the worker then uses it for the bootstraps.
//
// Per step, Collect does not allocate once its buffers have grown; per
// segment it allocates a little to check the segment (Segment.Check) and to
// record the episodes that ended (Segment.Episodes, At = the step index).
type SegmentWorker struct {
	envs    env.Vector
	policy  PolicyNet
	sampler Sampler
	gamma   float32
	id      int

	obs   []float32 // the observations the policy acts on next
	out   []float32 // policy outputs, n × OutDim
	acts  Acts
	final []float32 // bootstrap values
	rows  []float32 // policy rows for them (a policy without ValuesTo)
	steps int64     // env steps taken, for the sampler's schedules
}

// NewSegmentWorker returns the env worker id stepping envs with policy and
// sampler, bootstrapping truncations with discount gamma. Reset it before
// the first Collect.
func NewSegmentWorker(id int, envs env.Vector, policy PolicyNet, sampler Sampler, gamma float32) *SegmentWorker {
	return &SegmentWorker{envs: envs, policy: policy, sampler: sampler, gamma: gamma, id: id}
}

// Reset resets the envs with seed and keeps the first observations.
func (w *SegmentWorker) Reset(seed int64) error {
	b, err := w.envs.Reset(seed)
	if err != nil {
		return fmt.Errorf("algo: reset: %w", err)
	}
	w.obs = append(w.obs[:0], b.Obs...)
	return nil
}

// Collect fills seg with seg.T steps of every env (seg.N must be the number
// of envs) acting with the policy's current weights, whose version it
// records.
func (w *SegmentWorker) Collect(seg *sample.Segment) error {
	n, od, ad := seg.N, seg.ObsDim, seg.ActDim
	if err := seg.Check(); err != nil {
		return err
	}
	if w.obs == nil || n != w.envs.NumEnvs() || n*od != len(w.obs) {
		return fmt.Errorf("algo: collect: segment of %d envs × %d obs for %d envs × %d (Reset first)",
			n, od, w.envs.NumEnvs(), len(w.obs)/max(w.envs.NumEnvs(), 1))
	}
	width := w.policy.OutDim()
	seg.Version, seg.Worker, seg.Episodes = w.policy.Version(), w.id, seg.Episodes[:0]
	for t := range seg.T {
		row := t * n
		copy(seg.Obs[row*od:(row+n)*od], w.obs)
		w.out = w.policy.ForwardTo(ensureLen(w.out, n*width), w.obs, n)
		w.sampler.SampleTo(&w.acts, w.out, n, w.steps)
		if len(w.acts.Actions) != n*ad {
			return fmt.Errorf("algo: collect: the sampler gave %d action values for %d envs × %d", len(w.acts.Actions), n, ad)
		}
		copy(seg.Actions[row*ad:(row+n)*ad], w.acts.Actions)
		copy(seg.LogProbs[row:row+n], w.acts.LogProbs)
		copy(seg.Values[row:row+n], w.acts.Values)
		b, err := w.envs.Step(w.acts.EnvActions)
		if err != nil {
			return fmt.Errorf("algo: step: %w", err)
		}
		w.steps += int64(n)
		for i := range n {
			k := row + i
			seg.Rewards[k] = b.Rewards[i]
			seg.Dones[k] = 0
			if !b.Done(i) {
				continue
			}
			seg.Dones[k] = 1
			if b.Truncated[i] && !b.Terminated[i] {
				w.final = w.valuesTo(w.final, b.FinalObsRow(i), 1)
				seg.Rewards[k] += w.gamma * w.final[0]
			}
			if b.Infos[i].HasEpisode {
				ep := b.Infos[i].Episode
				seg.Episodes = append(seg.Episodes, sample.Episode{Return: ep.Return, Length: ep.Length, At: t})
			}
		}
		copy(w.obs, b.Obs)
	}
	copy(seg.NextObs, w.obs)
	copy(seg.LastValues, w.valuesTo(w.final, w.obs, n))
	return nil
}

// valuer is the optional interface of policies that compute V(s) alone.
type valuer interface {
	ValuesTo(dst, obs []float32, n int) []float32
}

// valuesTo returns V(obs) for n observations in buf (grown as needed): from
// the policy's ValuesTo if it has one, else the last column of its rows.
func (w *SegmentWorker) valuesTo(buf, obs []float32, n int) []float32 {
	if v, ok := w.policy.(valuer); ok {
		return v.ValuesTo(ensureLen(buf, n), obs, n)
	}
	width := w.policy.OutDim()
	w.rows = w.policy.ForwardTo(ensureLen(w.rows, n*width), obs, n)
	buf = ensureLen(buf, n)
	for i := range n {
		buf[i] = w.rows[(i+1)*width-1]
	}
	return buf
}

// LogEpisodes reports seg's episodes to log at the global steps they ended,
// given the global step before the segment (one step = N env steps), and
// returns the global step after it.
func LogEpisodes(log Logger, seg *sample.Segment, globalStep int64) int64 {
	for _, e := range seg.Episodes {
		log.Episode(globalStep+int64(e.At+1)*int64(seg.N), e.Return, e.Length)
	}
	return globalStep + int64(seg.T)*int64(seg.N)
}

func ensureLen(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
