package nn

import (
	"encoding/binary"
	"fmt"
	"math"
)

// StatefulOptimizer is an Optimizer whose whole state (learning rate, step
// counts, moment buffers) can be saved and restored, for training runs that
// resume bit for bit. The state is keyed by the position of each parameter
// in params, which must list the same parameters, with the same sizes, in
// the same order on save and on load.
type StatefulOptimizer interface {
	Optimizer
	MarshalState(params []*Param) ([]byte, error)
	UnmarshalState(params []*Param, b []byte) error
}

var (
	_ StatefulOptimizer = (*Adam)(nil)
	_ StatefulOptimizer = (*SGD)(nil)
	_ StatefulOptimizer = (*RMSProp)(nil)
)

// optState writes and reads the optimizer state format: a float32 learning
// rate, then per parameter a presence byte and, when present, a uint64 step
// count and k buffers of len(Value) float32s.
type optState struct {
	b   []byte
	err error
}

func (w *optState) putU64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *optState) f32s(v []float32) {
	for _, x := range v {
		w.b = binary.LittleEndian.AppendUint32(w.b, math.Float32bits(x))
	}
}

func (r *optState) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%w: optimizer state is %d bytes short", ErrConfig, n-len(r.b))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *optState) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *optState) readF32s(dst []float32) {
	p := r.take(4 * len(dst))
	if p == nil {
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
}

func (r *optState) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: optimizer state has %d bytes too many (other parameters?)", ErrConfig, len(r.b))
	}
	return r.err
}

func (o *Adam) MarshalState(params []*Param) ([]byte, error) {
	var w optState
	w.f32s([]float32{o.cfg.LR})
	for _, p := range params {
		s := o.state[p]
		if s == nil {
			w.b = append(w.b, 0)
			continue
		}
		w.b = append(w.b, 1)
		w.putU64(uint64(s.t))
		w.f32s(s.m)
		w.f32s(s.v)
	}
	return w.b, nil
}

func (o *Adam) UnmarshalState(params []*Param, b []byte) error {
	r := optState{b: b}
	lr := make([]float32, 1)
	r.readF32s(lr)
	state := map[*Param]*adamState{}
	for _, p := range params {
		switch f := r.take(1); {
		case f == nil:
		case f[0] == 1:
			s := &adamState{t: int(r.u64() & math.MaxInt32), m: make([]float32, len(p.Value)), v: make([]float32, len(p.Value))}
			r.readF32s(s.m)
			r.readF32s(s.v)
			state[p] = s
		case f[0] != 0:
			r.err = fmt.Errorf("%w: optimizer state is malformed", ErrConfig)
		}
	}
	if err := r.done(); err != nil {
		return err
	}
	o.cfg.LR, o.state = lr[0], state
	return nil
}

func (o *SGD) MarshalState(params []*Param) ([]byte, error) {
	var w optState
	w.f32s([]float32{o.lr})
	for _, p := range params {
		buf := o.buf[p]
		if buf == nil {
			w.b = append(w.b, 0)
			continue
		}
		w.b = append(w.b, 1)
		w.putU64(0)
		w.f32s(buf)
	}
	return w.b, nil
}

func (o *SGD) UnmarshalState(params []*Param, b []byte) error {
	r := optState{b: b}
	lr := make([]float32, 1)
	r.readF32s(lr)
	bufs := map[*Param][]float32{}
	for _, p := range params {
		switch f := r.take(1); {
		case f == nil:
		case f[0] == 1:
			r.u64()
			buf := make([]float32, len(p.Value))
			r.readF32s(buf)
			bufs[p] = buf
		case f[0] != 0:
			r.err = fmt.Errorf("%w: optimizer state is malformed", ErrConfig)
		}
	}
	if err := r.done(); err != nil {
		return err
	}
	o.lr, o.buf = lr[0], bufs
	return nil
}

func (o *RMSProp) MarshalState(params []*Param) ([]byte, error) {
	var w optState
	w.f32s([]float32{o.cfg.LR})
	for _, p := range params {
		sq, avg := o.sq[p], o.avg[p]
		if sq == nil {
			w.b = append(w.b, 0)
			continue
		}
		flag := byte(1)
		if avg != nil {
			flag = 2
		}
		w.b = append(w.b, flag)
		w.putU64(0)
		w.f32s(sq)
		w.f32s(avg)
	}
	return w.b, nil
}

func (o *RMSProp) UnmarshalState(params []*Param, b []byte) error {
	r := optState{b: b}
	lr := make([]float32, 1)
	r.readF32s(lr)
	sqs, avgs := map[*Param][]float32{}, map[*Param][]float32{}
	for _, p := range params {
		switch f := r.take(1); {
		case f == nil:
		case f[0] == 1 || f[0] == 2:
			r.u64()
			sq := make([]float32, len(p.Value))
			r.readF32s(sq)
			sqs[p] = sq
			if f[0] == 2 {
				avg := make([]float32, len(p.Value))
				r.readF32s(avg)
				avgs[p] = avg
			}
		case f[0] != 0:
			r.err = fmt.Errorf("%w: optimizer state is malformed", ErrConfig)
		}
	}
	if err := r.done(); err != nil {
		return err
	}
	o.cfg.LR, o.sq, o.avg = lr[0], sqs, avgs
	return nil
}
