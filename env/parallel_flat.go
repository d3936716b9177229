package env

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FlatOptions configure NewFlatVector and NewTurnEnv.
type FlatOptions struct {
	// AgentID appends a one-hot agent id (position in PossibleAgents) to
	// every observation, so one shared network can tell agents apart.
	AgentID bool
	// State appends the global state to every row, last: the env's own
	// (GlobalState, PettingZoo's state()) when it has one, else the joint
	// observation (every agent's own observation, unpadded, in
	// PossibleAgents order; zeros for agents not present), which is what
	// MPE's state() is. It is the input of a centralized critic (MAPPO);
	// the actor of such a policy reads only the leading local part (ppo's
	// actor_obs).
	State bool
	// ActionMask appends, after the one-hot id, one value per action of
	// the agents' Discrete action space: 1 for a legal action, 0 for an
	// illegal one, from the ActionMask of the info that came with the
	// observation (PettingZoo's info["action_mask"]; all 1 without one).
	// An on-policy policy gives the masked actions probability 0.
	ActionMask bool
	// EpisodeStatistics reports each agent's episode return and length in
	// Info.Episode on the row where its episode ends (Vector's
	// RecordEpisodeStatistics).
	EpisodeStatistics bool
	// AgentActionSpaces lets the agents have different action spaces, for
	// callers that act for each agent with a network of its own action
	// space (several policies: a part of SplitVector, whose ActionSpace
	// is its rows' own). ActionSpace is then an unbounded Box as wide as
	// the widest agent's action; row r's action is the first
	// AgentActionSpace(r % agents).Dim() values of its row, the rest are
	// ignored. Without it, agents with different action spaces are
	// refused: one network cannot act for all of them.
	AgentActionSpaces bool
	// ActAs names an agent whose action space a TurnEnv reports as its
	// ActionSpace (the id keyword act_as): the env as seen by a policy
	// that acts for that agent and the others with its action space,
	// when the agents' spaces differ. It implies AgentActionSpaces.
	ActAs string
}

// RowLayout is the layout of a multi-agent row (FlatVector, TurnEnv): Obs
// values of the agent's own observation (padded with zeros to the
// longest agent's), then, with AgentID, Agents values of one-hot agent
// id, then Mask values of action mask (FlatOptions.ActionMask), then
// State values of the global state (FlatOptions.State).
type RowLayout struct {
	// Agents is the number of agents per env; 0 means the rows are not a
	// multi-agent env's (RowsOf reports false).
	Agents  int
	Obs     int
	AgentID bool
	Mask    int
	State   int
}

// Local is how many leading values of a row the agent observes itself:
// its padded observation and its one-hot id.
func (l RowLayout) Local() int {
	if l.AgentID {
		return l.Obs + l.Agents
	}
	return l.Obs
}

// Width is the length of a row.
func (l RowLayout) Width() int { return l.Local() + l.Mask + l.State }

// rowLayouter is implemented by the vectors and envs whose rows are a
// multi-agent env's.
type rowLayouter interface{ RowLayout() RowLayout }

// RowsOf returns the row layout of v when v is a multi-agent vector or
// env (FlatVector, TurnEnv, a part of a SplitVector of either), so that an
// algorithm can check which columns are the agent's own.
func RowsOf(v any) (RowLayout, bool) {
	if r, ok := v.(rowLayouter); ok {
		l := r.RowLayout()
		return l, l.Agents > 0
	}
	return RowLayout{}, false
}

// FlatVector turns a ParallelVector into a Vector of per-agent rows, for
// policies that share parameters across agents: row i·A + j is agent j
// (in PossibleAgents order) of env i, A agents per env. Every agent must
// have the same action space, unless FlatOptions.AgentActionSpaces. Observations are padded with zeros to the
// longest agent observation, then (FlatOptions.AgentID) followed by the
// one-hot agent id.
//
// A row whose agent has left its env while others play on (terminated or
// truncated before the episode ended) is a "dead row" until the env
// resets, as SuperSuit's black_death: its observation is zeros, its
// reward 0, its action is ignored; when the env's episode ends, the dead
// row reports terminated with a zero final observation. DeadRowSteps
// counts these steps so that they are never invisible. MPE agents all
// leave together, so MPE has none.
type FlatVector struct {
	pv       *ParallelVector
	opt      FlatOptions
	nAgents  int
	rawDim   int
	rawDims  []int // per agent
	stateDim int
	maskDim  int
	envState bool // the envs have a global state (GlobalState)
	obsDim   int
	obsSpace Space
	actSpace Space
	acts     []Space // per agent
	dicts    []Space // per agent: its Dict observation space, nil for a Box
	flatBufs [][]float32
	mixed    bool // the agents' action spaces differ (FlatOptions.AgentActionSpaces)
	batch    Batch
	actMaps  []map[string][]float32
	dead     []bool // per row: the agent left before its env's episode ended
	ret      []float64
	length   []int
	deadRows int64
	closed   bool
}

// NewFlatVector wraps pv; it closes pv when closed.
func NewFlatVector(pv *ParallelVector, opt FlatOptions) (*FlatVector, error) {
	agents := pv.PossibleAgents()
	f := &FlatVector{pv: pv, opt: opt, nAgents: len(agents)}
	var lows, highs [][]float32
	var gs Box // the env's global state space (GlobalState), if it has one
	if sp := pv.globalStateSpace(); sp != nil {
		b, ok := sp.(Box)
		if !ok {
			return nil, fmt.Errorf("%w: global state space %v is not a Box", ErrInvalidOption, sp)
		}
		gs = b
	}
	for j, a := range agents {
		os := pv.ObservationSpace(j)
		box, ok := os.(Box)
		var dict Space
		if _, isDict := os.(Dict); isDict {
			// Rows hold Gymnasium's flattened observation.
			b, err := FlattenSpace(os)
			if err != nil {
				return nil, fmt.Errorf("agent %s: %w", a, err)
			}
			box, ok, dict = b, true, os
		}
		if !ok {
			return nil, fmt.Errorf("%w: agent %s observation space %v is not a Box or a Dict", ErrInvalidOption, a, os)
		}
		f.dicts = append(f.dicts, dict)
		f.flatBufs = append(f.flatBufs, nil)
		lows, highs = append(lows, box.Low), append(highs, box.High)
		f.rawDim = max(f.rawDim, box.Dim())
		f.rawDims = append(f.rawDims, box.Dim())
		f.stateDim += box.Dim()
		as := pv.acts[j]
		f.acts = append(f.acts, as)
		if j == 0 {
			f.actSpace = as
		} else if as.String() != f.actSpace.String() {
			if !opt.AgentActionSpaces {
				return nil, fmt.Errorf("%w: agents %s and %s have different action spaces, %v and %v: one policy cannot act for both; "+
					"give each group of agents with one action space a policy of its own (a multiagent section)", ErrInvalidOption, agents[0], a, f.actSpace, as)
			}
			f.mixed = true
		}
	}
	if f.mixed {
		d := 0
		for _, as := range f.acts {
			d = max(d, as.Dim())
		}
		f.actSpace = UniformBox(float32(math.Inf(-1)), float32(math.Inf(1)), d)
	}
	f.obsDim = f.rawDim
	if opt.AgentID {
		f.obsDim += f.nAgents
	}
	if opt.ActionMask {
		if f.mixed {
			return nil, fmt.Errorf("%w: action_mask needs one Discrete action space for every agent, not %v", ErrInvalidOption, f.acts)
		}
		d, ok := f.actSpace.(Discrete)
		if !ok {
			return nil, fmt.Errorf("%w: action_mask needs a Discrete action space, not %v", ErrInvalidOption, f.actSpace)
		}
		f.maskDim = d.N
	}
	idEnd := f.obsDim
	f.obsDim += f.maskDim
	if gs.Dim() > 0 {
		f.stateDim, f.envState = gs.Dim(), true
	}
	if opt.State {
		f.obsDim += f.stateDim
	}
	low, high := make([]float32, f.obsDim), make([]float32, f.obsDim)
	for k := range f.rawDim {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for j := range lows {
			if k < len(lows[j]) {
				lo, hi = min(lo, lows[j][k]), max(hi, highs[j][k])
			} else {
				lo, hi = min(lo, 0), max(hi, 0) // padding
			}
		}
		low[k], high[k] = lo, hi
	}
	for k := f.rawDim; k < idEnd+f.maskDim; k++ {
		high[k] = 1
	}
	k := idEnd + f.maskDim
	switch {
	case opt.State && f.envState:
		copy(low[k:], gs.Low)
		copy(high[k:], gs.High)
	case opt.State:
		for j := range lows {
			for i := range lows[j] {
				low[k], high[k] = min(lows[j][i], 0), max(highs[j][i], 0)
				k++
			}
		}
	}
	box, err := NewBox(low, high)
	if err != nil {
		return nil, err
	}
	f.obsSpace = box
	rows := pv.NumEnvs() * f.nAgents
	f.batch = NewBatch(rows, f.obsDim)
	f.actMaps = make([]map[string][]float32, pv.NumEnvs())
	for i := range f.actMaps {
		f.actMaps[i] = map[string][]float32{}
	}
	f.dead = make([]bool, rows)
	f.ret = make([]float64, rows)
	f.length = make([]int, rows)
	return f, nil
}

// NumEnvs is the number of rows: envs × agents.
func (f *FlatVector) NumEnvs() int { return len(f.dead) }

// LocalDim is how many leading values of a row an agent observes itself
// (its padded observation and the one-hot id): the actor's input when
// FlatOptions.State appends the global state for the critic.
func (f *FlatVector) LocalDim() int {
	if f.opt.AgentID {
		return f.rawDim + f.nAgents
	}
	return f.rawDim
}

// RowLayout is the layout of every row.
func (f *FlatVector) RowLayout() RowLayout {
	l := RowLayout{Agents: f.nAgents, Obs: f.rawDim, AgentID: f.opt.AgentID, Mask: f.maskDim}
	if f.opt.State {
		l.State = f.stateDim
	}
	return l
}

// NumAgents is the number of agents (rows) per env.
func (f *FlatVector) NumAgents() int { return f.nAgents }

// ObservationSpace is a row's space: the padded observation (+ one-hot id).
func (f *FlatVector) ObservationSpace() Space { return f.obsSpace }

// ActionSpace is the agents' common action space, or, when their spaces
// differ (FlatOptions.AgentActionSpaces), an unbounded Box as wide as the
// widest agent's.
func (f *FlatVector) ActionSpace() Space { return f.actSpace }

// AgentActionSpace is agent j's action space (PossibleAgents order).
func (f *FlatVector) AgentActionSpace(j int) Space { return f.acts[j] }

// RowActionSpace is the action space of row r's agent.
func (f *FlatVector) RowActionSpace(r int) Space { return f.acts[r%f.nAgents] }

// DeadRowSteps counts row-steps of agents that had left their episode
// (see FlatVector).
func (f *FlatVector) DeadRowSteps() int64 { return f.deadRows }

// Parallel returns the wrapped vector.
func (f *FlatVector) Parallel() *ParallelVector { return f.pv }

// writeObs writes agent j's row: its observation o padded, its one-hot
// id, and the global state (FlatOptions): the env's own state when it has
// one (GlobalState), else the joint observation of all.
func (f *FlatVector) writeObs(dst []float32, o []float32, j int, all map[string][]float32, state []float32, mask []bool) {
	n := copy(dst[:f.rawDim], f.agentObs(j, o))
	clear(dst[n:])
	k := f.rawDim
	if f.opt.AgentID {
		dst[k+j] = 1
		k += f.nAgents
	}
	if f.maskDim > 0 {
		for i := range f.maskDim {
			if mask == nil || (i < len(mask) && mask[i]) {
				dst[k+i] = 1
			}
		}
		k += f.maskDim
	}
	if f.opt.State && f.envState {
		copy(dst[k:k+f.stateDim], state)
	} else if f.opt.State {
		for i, a := range f.pv.possible {
			copy(dst[k:k+f.rawDims[i]], f.agentObs(i, all[a])) // absent: left zero
			k += f.rawDims[i]
		}
	}
}

// agentObs is agent j's observation o as its row holds it: flattened
// when the agent observes a Dict (valid until the next call for j).
func (f *FlatVector) agentObs(j int, o []float32) []float32 {
	if f.dicts[j] == nil || o == nil {
		return o
	}
	f.flatBufs[j] = FlattenTo(f.flatBufs[j], f.dicts[j], o)
	return f.flatBufs[j]
}

// dictSpace is the first Dict observation space among the agents'.
func (f *FlatVector) dictSpace() (Space, bool) {
	for _, d := range f.dicts {
		if d != nil {
			return d, true
		}
	}
	return nil, false
}

// Reset resets every env (ParallelVector.Reset).
func (f *FlatVector) Reset(seed int64) (*Batch, error) {
	if f.closed {
		return nil, fmt.Errorf("%w: flat vector Reset", ErrClosed)
	}
	steps, err := f.pv.Reset(seed)
	if err != nil {
		return nil, err
	}
	b := &f.batch
	for i := range steps {
		for j, a := range f.pv.possible {
			r := i*f.nAgents + j
			o, ok := steps[i].Obs[a]
			f.dead[r] = !ok
			f.writeObs(b.Obs[r*b.ObsDim:(r+1)*b.ObsDim], o, j, steps[i].Obs, steps[i].State, steps[i].Infos[a].ActionMask)
			b.Rewards[r], b.Terminated[r], b.Truncated[r], b.Infos[r] = 0, false, false, steps[i].Infos[a]
			f.ret[r], f.length[r] = 0, 0
		}
	}
	return b, nil
}

// Step takes NumEnvs()·ActionSpace().Dim() values, row by row (with
// different action spaces, each row's agent reads the leading values of
// its row: FlatOptions.AgentActionSpaces).
func (f *FlatVector) Step(actions []float32) (*Batch, error) {
	if f.closed {
		return nil, fmt.Errorf("%w: flat vector Step", ErrClosed)
	}
	if err := CheckActions(f.actSpace, f.NumEnvs(), actions); err != nil {
		return nil, err
	}
	d := f.actSpace.Dim()
	for i, m := range f.actMaps {
		clear(m)
		for j, a := range f.pv.possible {
			r := i*f.nAgents + j
			if !f.dead[r] {
				m[a] = actions[r*d : r*d+f.acts[j].Dim()]
			}
		}
	}
	steps, err := f.pv.Step(f.actMaps)
	if err != nil {
		return nil, err
	}
	b := &f.batch
	od := b.ObsDim
	for i := range steps {
		s := &steps[i]
		for j, a := range f.pv.possible {
			r := i*f.nAgents + j
			row := b.Obs[r*od : (r+1)*od]
			b.Infos[r] = Info{}
			if f.dead[r] {
				f.deadRows++
				b.Rewards[r], b.Truncated[r] = 0, false
				b.Terminated[r] = s.Done
				if s.Done {
					clear(b.FinalObs[r*od : (r+1)*od])
					o, ok := s.Obs[a]
					f.dead[r] = !ok
					f.writeObs(row, o, j, s.Obs, s.State, s.ObsInfos[a].ActionMask)
					f.ret[r], f.length[r] = 0, 0
				} else {
					clear(row)
				}
				continue
			}
			b.Infos[r] = s.Infos[a] // the agent's own info (episode statistics below)
			rew := s.Rewards[a]
			term, trunc := s.Terminations[a], s.Truncations[a]
			b.Rewards[r], b.Terminated[r], b.Truncated[r] = float32(rew), term, trunc
			f.ret[r] += rew
			f.length[r]++
			if term || trunc {
				if f.opt.EpisodeStatistics {
					b.Infos[r].HasEpisode = true
					b.Infos[r].Episode = EpisodeStats{Return: f.ret[r], Length: f.length[r]}
				}
				f.ret[r], f.length[r] = 0, 0
				final, finalState := s.FinalObs, s.FinalState
				if !s.Done {
					final, finalState = s.Obs, s.State
				}
				f.writeObs(b.FinalObs[r*od:(r+1)*od], final[a], j, final, finalState, s.Infos[a].ActionMask)
				if !s.Done {
					f.dead[r] = true
					clear(row)
					continue
				}
			}
			o, ok := s.Obs[a]
			f.dead[r] = !ok // an agent absent from the next episode
			f.writeObs(row, o, j, s.Obs, s.State, s.ObsInfos[a].ActionMask)
		}
	}
	return b, nil
}

// Close closes the envs.
func (f *FlatVector) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	return f.pv.Close()
}

// MarshalEnvs saves the state of every row (VectorSnapshotter): each row's
// episode statistics and whether it is dead; the first row of each env
// also holds the env's state (its Parallel must be a Snapshotter), and row
// 0 the dead-row count. The vector's last observations are not saved: the
// caller keeps those it acts on. A remote vector gives ErrNoSnapshot.
func (f *FlatVector) MarshalEnvs() ([][]byte, error) {
	if f.pv.batch != nil {
		return nil, fmt.Errorf("%w: a remote multi-agent vector", ErrNoSnapshot)
	}
	out := make([][]byte, f.NumEnvs())
	for r := range out {
		b := append([]byte(nil), boolByte(f.dead[r]))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.ret[r]))
		b = binary.LittleEndian.AppendUint64(b, uint64(f.length[r]))
		if r == 0 {
			b = binary.LittleEndian.AppendUint64(b, uint64(f.deadRows))
		}
		if r%f.nAgents == 0 {
			e := f.pv.envs[r/f.nAgents]
			s, ok := e.(Snapshotter)
			if !ok {
				return nil, fmt.Errorf("%w: %T", ErrNoSnapshot, e)
			}
			es, err := s.MarshalState()
			if err != nil {
				return nil, fmt.Errorf("env: %w", err)
			}
			b = append(b, es...)
		}
		out[r] = b
	}
	return out, nil
}

// UnmarshalEnvs restores what MarshalEnvs saved into a vector made like
// the one that saved it.
func (f *FlatVector) UnmarshalEnvs(state func(i int) ([]byte, error)) error {
	if f.pv.batch != nil {
		return fmt.Errorf("%w: a remote multi-agent vector", ErrNoSnapshot)
	}
	for r := range f.NumEnvs() {
		b, err := state(r)
		if err != nil {
			return err
		}
		n := 17
		if r == 0 {
			n += 8
		}
		if len(b) < n || b[0] > 1 || (r%f.nAgents != 0 && len(b) != n) {
			return fmt.Errorf("env: a saved state of row %d (%d bytes) is malformed", r, len(b))
		}
		length := binary.LittleEndian.Uint64(b[9:])
		if length > math.MaxInt32 {
			return fmt.Errorf("env: a saved state of row %d is malformed", r)
		}
		f.dead[r], f.ret[r], f.length[r] = b[0] == 1, math.Float64frombits(binary.LittleEndian.Uint64(b[1:])), int(length)
		if r == 0 {
			f.deadRows = int64(binary.LittleEndian.Uint64(b[17:]))
		}
		if r%f.nAgents != 0 {
			continue
		}
		e := f.pv.envs[r/f.nAgents]
		s, ok := e.(Snapshotter)
		if !ok {
			return fmt.Errorf("%w: %T", ErrNoSnapshot, e)
		}
		if err := s.UnmarshalState(b[n:]); err != nil {
			return fmt.Errorf("env: %w", err)
		}
	}
	return nil
}
