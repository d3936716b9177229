package multipolicy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"herd/algo"
	"herd/env"
	"herd/internal/trainstate"
)

// # Checkpoints at a joint-step barrier
//
// A checkpoint of a run with several policies holds every policy's whole
// state at one joint step J, so that the envs' state, every policy's
// weights, optimizer, replay and random streams, and the held-back
// metrics agree. J is a multiple of unit (the least common multiple of
// the on-policy policies' num_steps; 1 when all are off-policy), where
// every policy's Train ends an iteration, and at or past each multiple
// of checkpoint_every (in all rows' steps). Each policy's Train is handed
// checkpoints of its own (algo.Checkpoints.Policy) whose Due says so at
// its step J·(its rows); its Save hands its sections over, and the last
// policy to hand them over for J writes the checkpoint: the sections of
// policy <id> as policy/<id>/<section>, each policy's held-back metrics
// calls (none: they are handed to the run's logger first) and episode
// columns (secLog), the joint step (secLoop) and the
// envs (env/<row>, env.MarshalVector of the whole vector). Until then no
// joint step can be taken (that policy has not stepped), so the envs
// stand at J.
//
// A cancelled run stops at a barrier too: the policies' context is
// cancelled in the round that takes the last joint step before the next
// multiple of unit, so every policy finishes that iteration and saves at
// the same J. A diverged run (algo.ErrDiverged) stops at once and saves
// nothing.
//
// On resume each policy's Train restores its own part (its Restored) and
// resets its part of the vector, as a fresh run does; the first joint
// step then restores the envs' state over the reset (onRound). Envs that
// cannot be saved (env.ErrNoSnapshot: a remote multi-agent env) are left
// out; every policy then resets them again with its restart seed (the
// lowest part's seed resets the vector) and the run counts numEnvs
// restarted envs (algo.Checkpoints.RestartEnvs).

// Sections of the joint checkpoint besides the policies' and the envs'.
const (
	secPolicy = "policy/"          // + id + "/" + the policy's own section
	secLog    = "multipolicy/log/" // + id: held-back calls and episode columns
	secLoop   = "multipolicy/loop" // the joint step
	secEnv    = "env/"             // + row: env.MarshalVector of the whole vector
)

// joint gathers the policies' sections of one joint step.
type joint struct {
	mu    sync.Mutex
	step  int64 // the joint step being gathered
	got   []map[string][]byte
	count int
}

// checkpoints returns each policy's checkpoints within the run's ck, and
// restores the executor's own state when the run resumes.
func (x *exec) checkpoints(ck *algo.Checkpoints, numEnvs int) ([]*algo.Checkpoints, error) {
	n := len(x.ids)
	x.joint.got = make([]map[string][]byte, n)
	var restored []*trainstate.State
	if s := ck.Restored(); s != nil {
		var err error
		if restored, err = x.restoreState(s); err != nil {
			return nil, err
		}
		if _, ok := s.Sections[secEnv+"0"]; ok {
			x.restore = func() error {
				return env.UnmarshalVector(x.v, func(i int) ([]byte, error) {
					b, ok := s.Sections[fmt.Sprintf("%s%d", secEnv, i)]
					if !ok {
						return nil, fmt.Errorf("%w: no section %s%d", trainstate.ErrCorrupt, secEnv, i)
					}
					return b, nil
				})
			}
		} else {
			ck.RestartEnvs(numEnvs)
		}
	}
	out := make([]*algo.Checkpoints, n)
	for k, id := range x.ids {
		rows := x.logs[k].rows
		p := algo.PolicyCheckpoint{ID: id,
			Due: func(step int64) bool {
				j := step / rows
				return step%rows == 0 && j%x.unit == 0 && j*x.totalRows >= ck.Next()
			},
			Save: func(step int64, sections map[string][]byte) error { return x.deposit(ck, k, step, sections) },
		}
		if restored != nil {
			p.Restored = restored[k]
		}
		out[k] = ck.Policy(p)
	}
	return out, nil
}

// restoreState restores the executor's state from the run's checkpoint s
// and returns each policy's part of it.
func (x *exec) restoreState(s *trainstate.State) ([]*trainstate.State, error) {
	b, ok := s.Sections[secLoop]
	if !ok || len(b) != 8 {
		return nil, fmt.Errorf("%w: section %s is missing or not 8 bytes", trainstate.ErrCorrupt, secLoop)
	}
	j := int64(binary.LittleEndian.Uint64(b))
	if j < 0 || j%x.unit != 0 || j*x.totalRows != s.Header.Step {
		return nil, fmt.Errorf("%w: joint step %d of %d rows is not the checkpoint's step %d, or not a multiple of %d", trainstate.ErrCorrupt, j, x.totalRows, s.Header.Step, x.unit)
	}
	x.stepsDone = s.Header.Step
	out := make([]*trainstate.State, len(x.ids))
	for k, id := range x.ids {
		lb, ok := s.Sections[secLog+id]
		if !ok {
			return nil, fmt.Errorf("%w: no section %s%s", trainstate.ErrCorrupt, secLog, id)
		}
		if err := x.logs[k].unmarshal(lb); err != nil {
			return nil, fmt.Errorf("policy %s: %w", id, err)
		}
		h := s.Header
		h.Step = j * x.logs[k].rows
		st := &trainstate.State{Header: h, Sections: map[string][]byte{}}
		prefix := secPolicy + id + "/"
		for name, v := range s.Sections {
			if rest, ok := strings.CutPrefix(name, prefix); ok {
				st.Sections[rest] = v
			}
		}
		if len(st.Sections) == 0 {
			return nil, fmt.Errorf("%w: no sections of policy %s", trainstate.ErrCorrupt, id)
		}
		out[k] = st
	}
	return out, nil
}

// deposit takes policy k's sections at its step; the last policy of a
// joint step writes the checkpoint. It runs on policy k's goroutine,
// between two of its env steps.
func (x *exec) deposit(ck *algo.Checkpoints, k int, step int64, sections map[string][]byte) error {
	rows := x.logs[k].rows
	if step%rows != 0 {
		return fmt.Errorf("multipolicy: policy %s saves at step %d, not a joint step of its %d rows", x.ids[k], step, rows)
	}
	js := &x.joint
	js.mu.Lock()
	defer js.mu.Unlock()
	j := step / rows
	if js.count > 0 && js.step != j && js.count < len(x.ids) {
		return fmt.Errorf("multipolicy: policy %s saves at joint step %d while the others saved at %d: the policies left the joint-step barrier", x.ids[k], j, js.step)
	}
	if js.got[k] == nil {
		js.count++
	} // else a second save of the same step (due, then interrupted): the same state
	js.step, js.got[k] = j, sections
	if js.count < len(x.ids) {
		return nil
	}
	defer func() { clear(js.got); js.count = 0 }()
	if x.stepsDone != j*x.totalRows {
		return fmt.Errorf("multipolicy: the policies save at joint step %d, the envs are at %d", j, x.stepsDone/x.totalRows)
	}
	// Every policy's calls of step J are made (each saves after them)
	// and no other is under way (each waits in its next env step or
	// has ended), so they are handed to the run's logger here rather
	// than in the next round: the metrics section then stands at J, as
	// the checkpoint does. The next round hands over nothing more and
	// repeats Step(J·rows), which changes nothing.
	x.flush()
	x.log.Step(x.stepsDone)
	out := map[string][]byte{secLoop: binary.LittleEndian.AppendUint64(nil, uint64(j))}
	for q, id := range x.ids {
		for name, b := range js.got[q] {
			out[secPolicy+id+"/"+name] = b
		}
		out[secLog+id] = x.logs[q].marshal()
	}
	ebs, err := env.MarshalVector(x.v)
	switch {
	case errors.Is(err, env.ErrNoSnapshot):
		// The policies left them out too (Checkpoints.EnvsSaveable).
	case err != nil:
		return fmt.Errorf("multipolicy: checkpoint at step %d: %w", j*x.totalRows, err)
	default:
		for i, b := range ebs {
			out[fmt.Sprintf("%s%d", secEnv, i)] = b
		}
	}
	return ck.Save(j*x.totalRows, out)
}

// diverged stops the policies at once when the run's ctx ends because it
// diverged (no checkpoint of non-finite weights), wherever they are; any
// other end stops them at the next joint barrier (barrier).
func (x *exec) diverged() {
	if cause := context.Cause(x.runCtx); errors.Is(cause, algo.ErrDiverged) {
		x.cancel(cause)
	}
}

// barrier runs in onRound, every policy waiting inside its env call:
// it restores the envs of a resumed run before its first joint step, and
// cancels the policies in the round whose step ends at a multiple of
// unit when the run was interrupted, or in a reset round (every policy
// is then at an iteration boundary).
func (x *exec) barrier(reset bool) {
	if !reset && x.restore != nil {
		restore := x.restore
		x.restore = nil
		if err := restore(); err != nil {
			x.failed = fmt.Errorf("multipolicy: resume from step %d: restore the envs: %w", x.stepsDone, err)
			x.cancel(x.failed)
		}
	}
	if x.cancel == nil || x.runCtx.Err() == nil {
		return
	}
	switch cause := context.Cause(x.runCtx); {
	case errors.Is(cause, algo.ErrDiverged):
		x.cancel(cause)
	case reset || (x.stepsDone/x.totalRows+1)%x.unit == 0:
		x.cancel(nil)
	}
}

// marshal saves the log's held-back calls and episode columns.
func (l *policyLog) marshal() []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(l.pending)))
	for _, c := range l.pending {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(c.name)))
		b = append(b, c.name...)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.value))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.step))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.length))
	}
	eb, _ := l.episodes.MarshalBinary()
	return append(b, eb...)
}

// unmarshal restores what marshal saved.
func (l *policyLog) unmarshal(b []byte) error {
	bad := fmt.Errorf("%w: held-back metrics of %d bytes are malformed", trainstate.ErrCorrupt, len(b))
	u64 := func() (uint64, bool) {
		if len(b) < 8 {
			return 0, false
		}
		v := binary.LittleEndian.Uint64(b)
		b = b[8:]
		return v, true
	}
	n, ok := u64()
	if !ok || n > uint64(len(b)) {
		return bad
	}
	l.pending = l.pending[:0]
	for range n {
		m, ok := u64()
		if !ok || m > uint64(len(b)) {
			return bad
		}
		name := string(b[:m])
		b = b[m:]
		v, ok1 := u64()
		st, ok2 := u64()
		ln, ok3 := u64()
		if !ok1 || !ok2 || !ok3 || ln > math.MaxInt32 {
			return bad
		}
		l.pending = append(l.pending, call{name: name, value: math.Float64frombits(v), step: int64(st), length: int(ln)})
	}
	return l.episodes.UnmarshalBinary(b)
}
