package env

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrNoSnapshot: an env (or a wrapper around it) whose state cannot be saved
// exactly; a resumed run restarts that env's episodes.
var ErrNoSnapshot = errors.New("env: state cannot be saved")

// MarshalChain saves the whole state of e and of every wrapper around it:
// TimeLimit's step count, RecordEpisodeStatistics' sums, and the innermost
// env's Snapshotter state. Wrappers without state of their own pass
// through; any other wrapper, or an innermost env that is not a
// Snapshotter, gives ErrNoSnapshot naming it.
func MarshalChain(e Env) ([]byte, error) {
	var b []byte
	for {
		switch w := e.(type) {
		case *TimeLimit:
			b = binary.LittleEndian.AppendUint64(b, uint64(w.elapsed))
			b = append(b, boolByte(w.over))
		case *RecordEpisodeStatistics:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w.ret))
			b = binary.LittleEndian.AppendUint64(b, uint64(w.length))
		case *ClipAction, *StrictActions:
		case Wrapper:
			return nil, fmt.Errorf("%w: wrapper %T", ErrNoSnapshot, e)
		case Snapshotter:
			s, err := w.MarshalState()
			if err != nil {
				return nil, fmt.Errorf("env: %w", err)
			}
			return append(b, s...), nil
		default:
			return nil, fmt.Errorf("%w: %T", ErrNoSnapshot, e)
		}
		e = e.(Wrapper).Unwrap()
	}
}

// VectorSnapshotter is a Vector that saves the state of its envs itself
// rather than env by env: a FlatVector, whose rows share multi-agent envs,
// and a part of a SplitVector. MarshalEnvs returns one state per row
// (NumEnvs); UnmarshalEnvs restores them, state(i) giving row i's.
type VectorSnapshotter interface {
	MarshalEnvs() ([][]byte, error)
	UnmarshalEnvs(state func(i int) ([]byte, error)) error
}

// MarshalVector saves every env of v (MarshalChain), in order. v must
// reach its envs one by one (SyncVector) or save them itself
// (VectorSnapshotter); another vector gives ErrNoSnapshot.
func MarshalVector(v Vector) ([][]byte, error) {
	if s, ok := v.(VectorSnapshotter); ok {
		return s.MarshalEnvs()
	}
	envs, err := envsOf(v)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, v.NumEnvs())
	for i := range out {
		if out[i], err = MarshalChain(envs.Env(i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UnmarshalVector restores into each env i of v (UnmarshalChain) the
// state that state(i) returns.
func UnmarshalVector(v Vector, state func(i int) ([]byte, error)) error {
	if s, ok := v.(VectorSnapshotter); ok {
		return s.UnmarshalEnvs(state)
	}
	envs, err := envsOf(v)
	if err != nil {
		return err
	}
	for i := range v.NumEnvs() {
		b, err := state(i)
		if err != nil {
			return err
		}
		if err := UnmarshalChain(envs.Env(i), b); err != nil {
			return err
		}
	}
	return nil
}

// envsOf returns v as a vector whose envs can be reached one by one.
func envsOf(v Vector) (interface{ Env(i int) Env }, error) {
	envs, ok := v.(interface{ Env(i int) Env })
	if !ok {
		return nil, fmt.Errorf("%w: vector %T does not expose its envs", ErrNoSnapshot, v)
	}
	return envs, nil
}

// UnmarshalChain restores into e (built like the env MarshalChain saved)
// the state MarshalChain returned. On error e may be partly restored:
// discard it.
func UnmarshalChain(e Env, b []byte) error {
	short := func(n int) error {
		if len(b) < n {
			return fmt.Errorf("env: a saved state of %d bytes is too short for %T", len(b), e)
		}
		return nil
	}
	for {
		switch w := e.(type) {
		case *TimeLimit:
			if err := short(9); err != nil {
				return err
			}
			el := binary.LittleEndian.Uint64(b)
			if el > math.MaxInt32 || b[8] > 1 {
				return fmt.Errorf("env: a saved TimeLimit state is malformed")
			}
			w.elapsed, w.over, b = int(el), b[8] == 1, b[9:]
		case *RecordEpisodeStatistics:
			if err := short(16); err != nil {
				return err
			}
			n := binary.LittleEndian.Uint64(b[8:])
			if n > math.MaxInt32 {
				return fmt.Errorf("env: a saved RecordEpisodeStatistics state is malformed")
			}
			w.ret, w.length, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), int(n), b[16:]
		case *ClipAction, *StrictActions:
		case Wrapper:
			return fmt.Errorf("%w: wrapper %T", ErrNoSnapshot, e)
		case Snapshotter:
			if err := w.UnmarshalState(b); err != nil {
				return fmt.Errorf("env: %w", err)
			}
			return nil
		default:
			return fmt.Errorf("%w: %T", ErrNoSnapshot, e)
		}
		e = e.(Wrapper).Unwrap()
	}
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
