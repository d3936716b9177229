package offpolicy

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"herd/algo"
	"herd/internal/trainstate"
	"herd/nn"
)

// LearnerState lists what of a learner a checkpoint saves, so that one
// codec (MarshalLearner, UnmarshalLearner) writes every off-policy
// learner: the parameters of every network (targets included), each
// optimizer's whole state with the parameters it steps, the sources of
// the learner's random streams, and its counters and carried scalars.
type LearnerState struct {
	Params  []*nn.Param
	Opts    []OptState
	Streams []*rand.PCG
	// Values are pointers to *uint64, *int64, *int, *float64 or
	// *algo.UpdateCounts.
	Values []any
}

// OptState is one optimizer and the parameters it steps, in order.
type OptState struct {
	Opt    nn.Optimizer
	Params []*nn.Param
}

// StateLearner is a learner whose whole state a checkpoint can save
// (the local executor's resume).
type StateLearner interface {
	LearnerState() LearnerState
}

// stateBuf writes and reads the sections of a checkpoint: fixed-size
// little-endian values and length-prefixed byte strings.
type stateBuf struct {
	b   []byte
	err error
}

func (w *stateBuf) u64(v uint64)     { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *stateBuf) bytes(p []byte)   { w.u64(uint64(len(p))); w.b = append(w.b, p...) }
func (w *stateBuf) f32s(v []float32) { w.b = trainstate.AppendFloat32s(w.b, v) }

func (r *stateBuf) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: a section is %d bytes short", trainstate.ErrCorrupt, n-uint64(len(r.b)))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *stateBuf) getU64() uint64 {
	if p := r.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *stateBuf) getBytes() []byte { return r.take(r.getU64()) }

func (r *stateBuf) getF32s(dst []float32) {
	p := r.take(4 * uint64(len(dst)))
	if p == nil {
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
}

// done reports a read error, or bytes left over.
func (r *stateBuf) done(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes too many", trainstate.ErrCorrupt, len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", what, r.err)
	}
	return nil
}

// MarshalLearner returns the state s lists.
func MarshalLearner(s LearnerState) ([]byte, error) {
	var w stateBuf
	n := 0
	for _, p := range s.Params {
		n += len(p.Value)
	}
	w.u64(uint64(n))
	for _, p := range s.Params {
		w.f32s(p.Value)
	}
	for i, o := range s.Opts {
		so, ok := o.Opt.(nn.StatefulOptimizer)
		if !ok {
			return nil, fmt.Errorf("optimizer %d (%T) cannot save its state", i, o.Opt)
		}
		b, err := so.MarshalState(o.Params)
		if err != nil {
			return nil, err
		}
		w.bytes(b)
	}
	for _, src := range s.Streams {
		b, err := src.MarshalBinary()
		if err != nil {
			return nil, err
		}
		w.bytes(b)
	}
	for _, v := range s.Values {
		switch v := v.(type) {
		case *uint64:
			w.u64(*v)
		case *int64:
			w.u64(uint64(*v))
		case *int:
			w.u64(uint64(*v))
		case *float64:
			w.u64(math.Float64bits(*v))
		case *algo.UpdateCounts:
			w.u64(v.Critic)
			w.u64(v.Actor)
			w.u64(v.Target)
		default:
			return nil, fmt.Errorf("offpolicy: a learner value of type %T", v)
		}
	}
	return w.b, nil
}

// UnmarshalLearner restores into the learner s lists (built as the one
// that was saved) the state MarshalLearner returned.
func UnmarshalLearner(s LearnerState, b []byte) error {
	r := stateBuf{b: b}
	n := 0
	for _, p := range s.Params {
		n += len(p.Value)
	}
	if got := r.getU64(); r.err == nil && got != uint64(n) {
		return fmt.Errorf("learner: %w: %d parameter values saved for %d", trainstate.ErrCorrupt, got, n)
	}
	for _, p := range s.Params {
		r.getF32s(p.Value)
	}
	for i, o := range s.Opts {
		so, ok := o.Opt.(nn.StatefulOptimizer)
		if !ok {
			return fmt.Errorf("learner: optimizer %d (%T) cannot restore its state", i, o.Opt)
		}
		if ob := r.getBytes(); r.err == nil {
			if err := so.UnmarshalState(o.Params, ob); err != nil {
				return fmt.Errorf("learner: optimizer %d: %w", i, err)
			}
		}
	}
	for i, src := range s.Streams {
		if sb := r.getBytes(); r.err == nil {
			if err := src.UnmarshalBinary(sb); err != nil {
				return fmt.Errorf("learner: stream %d: %w", i, err)
			}
		}
	}
	for _, v := range s.Values {
		switch v := v.(type) {
		case *uint64:
			*v = r.getU64()
		case *int64:
			*v = int64(r.getU64())
		case *int:
			*v = int(r.getU64())
		case *float64:
			*v = math.Float64frombits(r.getU64())
		case *algo.UpdateCounts:
			v.Critic, v.Actor, v.Target = r.getU64(), r.getU64(), r.getU64()
		default:
			return fmt.Errorf("offpolicy: a learner value of type %T", v)
		}
	}
	return r.done("learner")
}

// MarshalBinary returns the pending steps of every env's n-step
// accumulator (the transitions not yet complete).
func (a *Assembler) MarshalBinary() ([]byte, error) {
	var w stateBuf
	w.u64(uint64(len(a.nstep)))
	for _, s := range a.nstep {
		w.u64(uint64(s.n))
		w.u64(uint64(s.head))
		w.u64(uint64(s.count))
		w.u64(uint64(s.ready))
		w.u64(uint64(boolByte(s.flushed) | boolByte(s.term)<<1))
		w.f32s(s.obs)
		w.f32s(s.act)
		w.f32s(s.rew)
		w.f32s(s.next)
	}
	return w.b, nil
}

// UnmarshalBinary restores a state MarshalBinary returned into an
// assembler built alike.
func (a *Assembler) UnmarshalBinary(b []byte) error {
	r := stateBuf{b: b}
	if n := r.getU64(); r.err == nil && n != uint64(len(a.nstep)) {
		return fmt.Errorf("assembler: %w: %d envs saved for %d", trainstate.ErrCorrupt, n, len(a.nstep))
	}
	for _, s := range a.nstep {
		n, head, count, ready, flags := r.getU64(), r.getU64(), r.getU64(), r.getU64(), r.getU64()
		if r.err != nil {
			break
		}
		if n != uint64(s.n) || head >= n || count > n || ready > count || flags > 3 {
			return fmt.Errorf("assembler: %w: an n-step state of n %d, head %d, %d pending, %d ready for n %d", trainstate.ErrCorrupt, n, head, count, ready, s.n)
		}
		s.head, s.count, s.ready, s.flushed, s.term = int(head), int(count), int(ready), flags&1 != 0, flags&2 != 0
		r.getF32s(s.obs)
		r.getF32s(s.act)
		r.getF32s(s.rew)
		r.getF32s(s.next)
	}
	return r.done("assembler")
}

// MarshalBinary returns the sampler's own state: the OU noise of every
// env (nothing for Gaussian noise, which draws afresh each step).
func (s *NoisySampler) MarshalBinary() ([]byte, error) {
	var w stateBuf
	if s.OU == nil {
		return w.b, nil
	}
	w.u64(uint64(len(s.OU.X)))
	for _, x := range s.OU.X {
		w.u64(math.Float64bits(x))
	}
	return w.b, nil
}

// UnmarshalBinary restores a state MarshalBinary returned.
func (s *NoisySampler) UnmarshalBinary(b []byte) error {
	r := stateBuf{b: b}
	if s.OU != nil {
		if n := r.getU64(); r.err == nil && n != uint64(len(s.OU.X)) {
			return fmt.Errorf("sampler: %w: %d OU values saved for %d", trainstate.ErrCorrupt, n, len(s.OU.X))
		}
		for i := range s.OU.X {
			s.OU.X[i] = math.Float64frombits(r.getU64())
		}
	}
	return r.done("sampler")
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
