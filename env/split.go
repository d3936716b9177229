package env

import (
	"errors"
	"fmt"
	"sync"
)

// ErrPartEnded is returned by a part of SplitVector whose step cannot
// happen because another part was closed or failed first.
var ErrPartEnded = errors.New("env: a part of the split vector ended")

// SplitVector cuts v into parts that step in lockstep, one per group of
// rows: part k is a Vector of len(rows[k]) envs whose row r is row
// rows[k][r] of v. Each row belongs to exactly one part. It is how
// several policies act in one multi-agent vector (FlatVector): part k
// holds the rows of the agents that policy k acts for, and each part is
// driven by its own goroutine.
//
// Every part must make the same calls in the same order: a part's Step
// (or Reset) waits until every part has called Step (Reset); the last
// caller steps v once with all parts' actions and every part returns its
// rows of the result. The combined Reset uses the seed of the lowest
// part. A part's action space is v's, or, when v's rows have action
// spaces of their own (a FlatVector with FlatOptions.AgentActionSpaces),
// its rows' one, which they must share; v then reads the leading values
// of each row's action. Results depend only on the actions, never on the order in which
// parts arrive, so a run is deterministic when each part's driver is.
//
// A part that is closed, or calls Reset while the others Step, ends the
// split: every waiting and later call of another part returns an error
// wrapping ErrPartEnded. v is closed when every part is closed.
//
// OnRound, when not nil, is called by the last caller of each round,
// after every part has arrived and before v is stepped or reset (reset
// tells which); every part is then blocked inside Step or
// Reset, so OnRound may read state that the parts' drivers write
// between their calls.
func SplitVector(v Vector, rows [][]int, onRound func(reset bool)) ([]Vector, error) {
	n := v.NumEnvs()
	seen := make([]bool, n)
	for k, g := range rows {
		if len(g) == 0 {
			return nil, fmt.Errorf("%w: split vector: part %d has no rows", ErrInvalidOption, k)
		}
		for _, r := range g {
			if r < 0 || r >= n || seen[r] {
				return nil, fmt.Errorf("%w: split vector: row %d of part %d is out of range [0, %d) or in two parts", ErrInvalidOption, r, k, n)
			}
			seen[r] = true
		}
	}
	for r, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("%w: split vector: row %d is in no part", ErrInvalidOption, r)
		}
	}
	// A part's action space is its rows' own when the rows' agents have
	// different ones (FlatOptions.AgentActionSpaces), else v's.
	spaces := make([]Space, len(rows))
	for k, g := range rows {
		spaces[k] = v.ActionSpace()
		ra, ok := v.(interface{ RowActionSpace(r int) Space })
		if !ok {
			continue
		}
		spaces[k] = ra.RowActionSpace(g[0])
		for _, r := range g[1:] {
			if sp := ra.RowActionSpace(r); sp.String() != spaces[k].String() {
				return nil, fmt.Errorf("%w: split vector: part %d holds rows %d and %d, whose agents have different action spaces, %v and %v",
					ErrInvalidOption, k, g[0], r, spaces[k], sp)
			}
		}
	}
	s := &split{v: v, onRound: onRound, joint: make([]float32, n*v.ActionSpace().Dim()),
		seeds: make([]int64, len(rows)), arrived: make([]bool, len(rows))}
	s.cond = sync.NewCond(&s.mu)
	parts := make([]Vector, len(rows))
	for k, g := range rows {
		p := &splitPart{s: s, k: k, rows: append([]int(nil), g...), batch: NewBatch(len(g), v.ObservationSpace().Dim()), act: spaces[k]}
		s.parts = append(s.parts, p)
		parts[k] = p
	}
	return parts, nil
}

type split struct {
	v       Vector
	onRound func(reset bool)
	parts   []*splitPart

	mu      sync.Mutex
	cond    *sync.Cond
	op      int // opReset or opStep of the round being gathered
	arrived []bool
	waiting int
	seeds   []int64
	joint   []float32
	round   int64 // rounds completed (resets and steps)
	err     error // the split has ended
	closed  int
}

const (
	opNone = iota
	opReset
	opStep
)

type splitPart struct {
	s      *split
	k      int
	rows   []int
	batch  Batch
	act    Space // its rows' action space
	closed bool
}

func (p *splitPart) NumEnvs() int            { return len(p.rows) }
func (p *splitPart) ObservationSpace() Space { return p.s.v.ObservationSpace() }
func (p *splitPart) ActionSpace() Space      { return p.act }

// RowLayout is the split vector's (RowsOf), when it has one.
func (p *splitPart) RowLayout() RowLayout {
	l, _ := RowsOf(p.s.v)
	return l
}

func (p *splitPart) Reset(seed int64) (*Batch, error) { return p.s.call(p, opReset, seed, nil) }

func (p *splitPart) Step(actions []float32) (*Batch, error) {
	if err := CheckActions(p.ActionSpace(), len(p.rows), actions); err != nil {
		return nil, err
	}
	return p.s.call(p, opStep, 0, actions)
}

// call gathers part p into the current round and, when p is the last to
// arrive, runs the round.
func (s *split) call(p *splitPart, op int, seed int64, actions []float32) (*Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("%w: split vector part %d", ErrClosed, p.k)
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.waiting > 0 && s.op != op {
		s.fail(fmt.Errorf("%w: part %d called %s while the others called %s", ErrPartEnded, p.k, opName(op), opName(s.op)))
		return nil, s.err
	}
	s.op = op
	s.seeds[p.k] = seed
	if op == opStep {
		d, pd := s.v.ActionSpace().Dim(), p.act.Dim()
		for r, row := range p.rows {
			copy(s.joint[row*d:row*d+pd], actions[r*pd:(r+1)*pd])
		}
	}
	s.arrived[p.k] = true
	s.waiting++
	round := s.round
	if s.waiting < len(s.parts) {
		for s.round == round && s.err == nil {
			s.cond.Wait()
		}
		if s.round == round {
			return nil, s.err
		}
		return &p.batch, nil
	}
	// Last to arrive: every other part waits inside call.
	if s.onRound != nil {
		s.onRound(op == opReset)
	}
	var b *Batch
	var err error
	if op == opReset {
		b, err = s.v.Reset(s.seeds[0])
	} else {
		b, err = s.v.Step(s.joint)
	}
	if err != nil {
		s.fail(fmt.Errorf("%w: %w", ErrPartEnded, err))
		return nil, err
	}
	for _, q := range s.parts {
		q.copyFrom(b)
	}
	for k := range s.arrived {
		s.arrived[k] = false
	}
	s.waiting = 0
	s.round++
	s.cond.Broadcast()
	return &p.batch, nil
}

// fail ends the split (s.mu held) and wakes the waiting parts.
func (s *split) fail(err error) {
	if s.err == nil {
		s.err = err
	}
	s.cond.Broadcast()
}

func opName(op int) string {
	switch op {
	case opReset:
		return "Reset"
	case opStep:
		return "Step"
	}
	return "nothing"
}

// copyFrom copies p's rows of b into p's batch.
func (p *splitPart) copyFrom(b *Batch) {
	od := b.ObsDim
	for r, row := range p.rows {
		copy(p.batch.Obs[r*od:(r+1)*od], b.Obs[row*od:(row+1)*od])
		p.batch.Rewards[r] = b.Rewards[row]
		p.batch.Terminated[r] = b.Terminated[row]
		p.batch.Truncated[r] = b.Truncated[row]
		p.batch.Infos[r] = b.Infos[row]
		if b.Done(row) {
			copy(p.batch.FinalObs[r*od:(r+1)*od], b.FinalObs[row*od:(row+1)*od])
		}
	}
}

// Close closes this part; a part still waiting for it fails with
// ErrPartEnded. The last Close closes the wrapped vector.
func (p *splitPart) Close() error {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	s.closed++
	if s.closed < len(s.parts) {
		s.fail(fmt.Errorf("%w: part %d was closed", ErrPartEnded, p.k))
		return nil
	}
	return s.v.Close()
}

// MarshalEnvs makes a part a VectorSnapshotter whose rows' states are
// empty: its envs are shared with the other parts, so the caller that
// split the vector saves and restores them whole (MarshalVector of the
// split vector). It reports whether the split vector can be saved (the
// error MarshalVector of it gives), so that a part's driver leaves the
// envs out of its checkpoints exactly when the whole cannot be saved.
func (p *splitPart) MarshalEnvs() ([][]byte, error) {
	p.s.mu.Lock()
	_, err := MarshalVector(p.s.v)
	p.s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return make([][]byte, len(p.rows)), nil
}

// UnmarshalEnvs restores nothing (MarshalEnvs): the caller that split the
// vector restores it whole.
func (p *splitPart) UnmarshalEnvs(func(i int) ([]byte, error)) error { return nil }
