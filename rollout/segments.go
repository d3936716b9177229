package rollout

import (
	"fmt"
	"math"

	"herd/algo"
	"herd/env"
	"herd/sample"
)

// Segments is the on-policy env-step loop: it steps a vector of envs with
// a Policy whose acts carry log π(a|s) and V(s) (algo.Acts.LogProbs,
// Values) and fills sample.Segments. Per step t it copies the
// observations into the segment, acts, steps the envs and records rewards
// and dones, with the two bootstraps:
//
//   - truncation: when env i's episode was cut by a time limit (truncated,
//     not terminated), the envs have already reset it, so its reward
//     becomes r + γ·V(final observation) (Pardo et al. 2018, "Time Limits
//     in Reinforcement Learning"); Dones marks the step, so GAE does not
//     look across the reset. A terminated episode gets no bootstrap.
//   - the segment's end: NextObs holds the observations after the last
//     step and LastValues = V(NextObs).
//
// V comes from the policy's Values method (Valuer). A policy whose weights
// change between steps (ActVersion) has each step's version recorded in
// seg.Versions when the segment has them. Episodes that ended
// are recorded in the segment (At = the step index), and a policy with
// per-env state is told where one ended (EnvResetter). A recurrent policy
// (StateKeeper) has the states each segment starts from recorded in
// seg.State and its truncations bootstrapped from the env's own state; a
// policy whose V(s) depends on the env row otherwise (RowValuer: a policy
// per row, states kept by policy workers) bootstraps through RowValue.
//
// Per step, Collect does not allocate once its buffers have grown; per
// segment it allocates a little to check the segment. Not safe for
// concurrent use.
type Segments struct {
	blocks []env.Vector // the envs, stepped one block after another
	n      int          // envs in all
	policy Valuer
	pipe   Pipelined // policy, when it overlaps requests with steps
	gamma  float32
	id     int

	obs   []float32 // the observations the policy acts on next
	acts  algo.Acts
	final []float32 // bootstrap values
	// Steps counts the env steps taken, the step the policy's schedules
	// read; an executor that moves a worker's state elsewhere carries it.
	Steps int64
	// Stride is how much Steps grows per vector step: the global env
	// steps one step of these envs stands for (every worker's envs, where
	// several workers step in rounds); 0 means the loop's own envs.
	Stride int64
	// Gammas, when not nil, is each env's discount in place of the
	// loop's: the envs' rows belong to policies of different discounts.
	Gammas []float32
	// Ended holds the env of each episode of the last Collect, parallel to
	// its seg.Episodes: an executor that splits the envs' rows among
	// several policies routes each episode to its row's.
	Ended []int
}

// RowValuer is a Valuer whose V(s) depends on the env the observation is
// of, beyond what StateKeeper says: a policy that routes each row to its
// own policy, or keeps the envs' states where it runs inference.
// Segments bootstraps env i's truncated episode with RowValue(i, final
// observation), which advances no state.
type RowValuer interface {
	RowValue(i int, obs []float32) (float32, error)
}

// Valuer is a Policy that also gives V(s) for n observations (into dst,
// grown as needed), for the bootstraps.
type Valuer interface {
	Policy
	Values(dst, obs []float32, n int) ([]float32, error)
}

// versioner is a policy that knows the version of the weights it acts
// with, which Collect records in each segment.
type versioner interface{ Version() uint64 }

// actVersioner is a policy whose weights may change between steps (a
// policy worker's): ActVersion is the version of the last Act, which
// Collect records per step where the segment has Versions.
type actVersioner interface{ ActVersion() uint64 }

// Pipelined is a Valuer that overlaps its requests for actions with env
// steps (the dist executor's env groups: while one group of envs steps,
// the inference requests of the others are in flight). A loop made with
// NewBlockSegments steps its envs block by block: per step t it acts on
// block b's rows with ActBlock(b, …) and steps block b, and once block b
// stepped it hands the block's next observations to Prefetch(b, obs) (not
// after a segment's last step); at the start of each segment it
// prefetches every block. obs stays unchanged until ActBlock(b) returns.
type Pipelined interface {
	Valuer
	Prefetch(b int, obs []float32)
	ActBlock(b int, acts *algo.Acts, obs []float32, n int, step int64) error
}

// NewSegments returns env worker id's loop stepping envs with policy,
// bootstrapping truncations with discount gamma. Reset it before the
// first Collect.
func NewSegments(id int, envs env.Vector, policy Valuer, gamma float32) *Segments {
	return &Segments{blocks: []env.Vector{envs}, n: envs.NumEnvs(), policy: policy, gamma: gamma, id: id}
}

// NewBlockSegments is NewSegments for envs split into blocks of equal size
// (block b holds envs b·k … (b+1)·k − 1 of the segment) and a policy that
// overlaps its requests with the steps (Pipelined). Per env, the steps,
// resets, bootstraps and episodes are those of one vector of all the envs,
// and a policy that acts on a row as it would in any batch gives the
// segments of NewSegments. Start it (the caller resets the envs) before
// the first Collect.
func NewBlockSegments(id int, blocks []env.Vector, policy Pipelined, gamma float32) (*Segments, error) {
	if len(blocks) == 0 {
		return nil, fmt.Errorf("rollout: no blocks of envs")
	}
	k := blocks[0].NumEnvs()
	for b, v := range blocks {
		if v.NumEnvs() != k || v.ObservationSpace().Dim() != blocks[0].ObservationSpace().Dim() || v.ActionSpace().Dim() != blocks[0].ActionSpace().Dim() {
			return nil, fmt.Errorf("rollout: block %d of %d envs (spaces %v, %v) unlike block 0 of %d (%v, %v)", b, v.NumEnvs(),
				v.ObservationSpace(), v.ActionSpace(), k, blocks[0].ObservationSpace(), blocks[0].ActionSpace())
		}
	}
	return &Segments{blocks: blocks, n: k * len(blocks), policy: policy, pipe: policy, gamma: gamma, id: id}, nil
}

// Reset resets the envs with seed and keeps the first observations.
func (w *Segments) Reset(seed int64) error {
	if len(w.blocks) > 1 {
		return fmt.Errorf("rollout: reset: a loop of %d blocks starts from the caller's resets (Start)", len(w.blocks))
	}
	b, err := w.blocks[0].Reset(seed)
	if err != nil {
		return fmt.Errorf("rollout: reset: %w", err)
	}
	w.obs = append(w.obs[:0], b.Obs...)
	return nil
}

// Start begins from observations the caller's own resets gave (N ×
// observation size, copied), in place of Reset.
func (w *Segments) Start(obs []float32) {
	w.obs = append(w.obs[:0], obs...)
}

// Observations are the observations the policy acts on next (N ×
// observation size; the loop's own buffer, valid until the next Collect):
// with Steps, the loop's state that a checkpoint saves and Start restores.
func (w *Segments) Observations() []float32 { return w.obs }

// Collect fills seg with seg.T steps of every env (seg.N must be the number
// of envs) acting with the policy's current weights, whose version it
// records.
func (w *Segments) Collect(seg *sample.Segment) error {
	n, od, ad := seg.N, seg.ObsDim, seg.ActDim
	if err := seg.Check(); err != nil {
		return err
	}
	if w.obs == nil || n != w.n || n*od != len(w.obs) {
		return fmt.Errorf("rollout: collect: segment of %d envs × %d obs for %d envs × %d (Reset first)",
			n, od, w.n, len(w.obs)/max(w.n, 1))
	}
	seg.Worker, seg.Episodes = w.id, seg.Episodes[:0]
	if v, ok := w.policy.(versioner); ok {
		seg.Version = v.Version()
	}
	resetter, _ := w.policy.(EnvResetter)
	perStep, _ := w.policy.(actVersioner)
	if len(seg.Versions) != seg.T {
		perStep = nil
	}
	keeper, _ := w.policy.(stater)
	if keeper != nil && keeper.StateDim() == 0 {
		keeper = nil
	}
	seg.State = seg.State[:0]
	if keeper != nil {
		seg.State = keeper.StateTo(seg.State, n)
	}
	w.Ended = w.Ended[:0]
	k := n / len(w.blocks)
	if w.pipe != nil {
		for b := range w.blocks {
			w.pipe.Prefetch(b, w.obs[b*k*od:(b+1)*k*od])
		}
	}
	for t := range seg.T {
		row := t * n
		copy(seg.Obs[row*od:(row+n)*od], w.obs)
		if perStep != nil {
			seg.Versions[t] = math.MaxUint64
		}
		for b, envs := range w.blocks {
			lo := b * k
			obs := w.obs[lo*od : (lo+k)*od]
			var err error
			if w.pipe != nil {
				err = w.pipe.ActBlock(b, &w.acts, obs, k, w.Steps)
			} else {
				err = w.policy.Act(&w.acts, obs, k, w.Steps)
			}
			if err != nil {
				return err
			}
			if len(w.acts.Actions) != k*ad || len(w.acts.LogProbs) != k || len(w.acts.Values) != k {
				return fmt.Errorf("rollout: collect: the policy gave %d action values, %d log-probs and %d values for %d envs × %d",
					len(w.acts.Actions), len(w.acts.LogProbs), len(w.acts.Values), k, ad)
			}
			if perStep != nil {
				// Blocks acted on by different versions: the oldest, so
				// that the lag a learner counts is never understated.
				seg.Versions[t] = min(seg.Versions[t], perStep.ActVersion())
			}
			at := row + lo
			copy(seg.Actions[at*ad:(at+k)*ad], w.acts.Actions)
			copy(seg.LogProbs[at:at+k], w.acts.LogProbs)
			copy(seg.Values[at:at+k], w.acts.Values)
			bt, err := envs.Step(w.acts.EnvActions)
			if err != nil {
				return fmt.Errorf("rollout: step: %w", err)
			}
			for i := range k {
				j := at + i
				seg.Rewards[j] = bt.Rewards[i]
				seg.Dones[j] = 0
				if !bt.Done(i) {
					continue
				}
				seg.Dones[j] = 1
				if bt.Truncated[i] && !bt.Terminated[i] {
					v, err := w.finalValue(lo+i, bt.FinalObsRow(i))
					if err != nil {
						return err
					}
					gamma := w.gamma
					if w.Gammas != nil {
						gamma = w.Gammas[lo+i]
					}
					seg.Rewards[j] += gamma * v
				}
				if bt.Infos[i].HasEpisode {
					ep := bt.Infos[i].Episode
					seg.Episodes = append(seg.Episodes, sample.Episode{Return: ep.Return, Length: ep.Length, At: t})
					w.Ended = append(w.Ended, lo+i)
				}
				if resetter != nil {
					resetter.ResetEnv(lo + i)
				}
			}
			copy(obs, bt.Obs)
			if w.pipe != nil && t+1 < seg.T {
				w.pipe.Prefetch(b, obs)
			}
		}
		if w.Stride > 0 {
			w.Steps += w.Stride
		} else {
			w.Steps += int64(n)
		}
	}
	copy(seg.NextObs, w.obs)
	v, err := w.policy.Values(w.final, w.obs, n)
	if err != nil {
		return err
	}
	w.final = v
	copy(seg.LastValues, v)
	return nil
}

// stater is the part of StateKeeper that Collect records seg.State with.
type stater interface {
	StateDim() int
	StateTo(dst []float32, n int) []float32
}

// finalValue is V(obs) of env i's final observation, the truncation
// bootstrap's: from the env's row (RowValuer), its recurrent state
// (StateKeeper), or the observation alone.
func (w *Segments) finalValue(i int, obs []float32) (float32, error) {
	if rv, ok := w.policy.(RowValuer); ok {
		return rv.RowValue(i, obs)
	}
	if k, ok := w.policy.(StateKeeper); ok && k.StateDim() > 0 {
		return k.EnvValue(i, obs), nil
	}
	var err error
	if w.final, err = w.policy.Values(w.final, obs, 1); err != nil {
		return 0, err
	}
	return w.final[0], nil
}

// LogEpisodes reports seg's episodes to log at the global steps they ended,
// given the global step before the segment (one step = N env steps), and
// returns the global step after it.
func LogEpisodes(log algo.Logger, seg *sample.Segment, globalStep int64) int64 {
	for _, e := range seg.Episodes {
		log.Episode(globalStep+int64(e.At+1)*int64(seg.N), e.Return, e.Length)
	}
	return globalStep + int64(seg.T)*int64(seg.N)
}
