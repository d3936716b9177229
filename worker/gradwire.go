package worker

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"herd/algo"
)

// gradWire is a learner's side of the gradient exchange of a group: it
// encodes its gradient into a message and averages the group's messages
// straight into a gradient, in learner-id order, with the bits of
// algo.AverageGrads over the decoded gradients. The exchange runs once per
// optimizer step (every minibatch), so it avoids what a decode into M
// gradients followed by AverageGrads costs: M + 2 more passes over the
// model and a fresh buffer per message.
//
// The message: the ticket's step and index, Targets and the part count;
// per part its Has, Steps, length and float32 values; then the stats'
// values. All little-endian.
type gradWire struct {
	// Two buffers, used in turn: a message is read by the other learners
	// until they end its round, and none ends the round after it before
	// this learner sends again, so the buffer of the round before is free
	// (the in-process collective hands the very slice to the others).
	buf  [2][]byte
	turn int
	// src holds, per part, the values of the messages that carry it;
	// vals their float32s, scratch the decoded copies where a message's
	// bytes cannot be read in place (see floats).
	src     [][]byte
	vals    [][]float32
	scratch [][]float32
}

// encode writes g into the next buffer and returns it.
func (w *gradWire) encode(g *algo.Grad) []byte {
	n := 24 + 12*len(g.Parts) + 4 + 8*len(g.Stats)
	for _, p := range g.Parts {
		n += 4 * len(p)
	}
	b := w.buf[w.turn]
	if cap(b) < n {
		b = make([]byte, n)
	}
	b = b[:n]
	w.buf[w.turn] = b
	w.turn ^= 1
	le := binary.LittleEndian
	le.PutUint64(b, uint64(g.Step))
	le.PutUint64(b[8:], g.Index)
	le.PutUint32(b[16:], uint32(g.Targets))
	le.PutUint32(b[20:], uint32(len(g.Parts)))
	o := 24
	for i, p := range g.Parts {
		le.PutUint32(b[o:], uint32(g.Has[i]))
		le.PutUint32(b[o+4:], uint32(g.Steps[i]))
		le.PutUint32(b[o+8:], uint32(len(p)))
		o += 12
		d := b[o : o+4*len(p)]
		if v, ok := view(d); ok {
			copy(v, p)
		} else {
			for j, v := range p {
				le.PutUint32(d[4*j:], math.Float32bits(v))
			}
		}
		o += 4 * len(p)
	}
	le.PutUint32(b[o:], uint32(len(g.Stats)))
	o += 4
	for _, s := range g.Stats {
		le.PutUint64(b[o:], math.Float64bits(s.Value))
		o += 8
	}
	return b
}

// average sets dst to the average of the group's messages all (learner-id
// order) as one update: each part the mean over the messages that carry
// it (Has 1 when any does, else 0 and zeros), Steps and Targets the
// largest, Stats the mean, N 1 and own's ticket. own is this learner's
// gradient of the same update, which all must fit: its shape, its stats
// and its ticket (another ticket means the learners' schedules diverged).
// dst may be own.
func (w *gradWire) average(dst, own *algo.Grad, all [][]byte) error {
	if len(dst.Parts) != len(own.Parts) {
		return fmt.Errorf("%w: a gradient of %d parts into one of %d", algo.ErrGradShape, len(own.Parts), len(dst.Parts))
	}
	// Check every message and find each one's parts before dst changes
	// (it may be own, whose shape the checks read).
	if len(w.src) != len(own.Parts)*len(all) {
		w.src = make([][]byte, len(own.Parts)*len(all))
	}
	le := binary.LittleEndian
	targets := 0
	for k, b := range all {
		t, err := w.check(k, len(all), own, b)
		if err != nil {
			return fmt.Errorf("learner %d's gradient: %w", k, err)
		}
		targets = max(targets, t)
	}
	for i := range dst.Parts {
		d := dst.Parts[i]
		src := w.src[i*len(all) : (i+1)*len(all)]
		n, steps := 0, 0
		w.vals = w.vals[:0]
		for k := range all {
			if src[k] == nil {
				continue
			}
			n += int(le.Uint32(src[k][:4]))
			steps = max(steps, int(le.Uint32(src[k][4:8])))
			w.vals = append(w.vals, w.floats(len(w.vals), src[k][12:]))
		}
		sumInto(d, w.vals, n)
		dst.Has[i], dst.Steps[i] = min(n, 1), steps
	}
	nStats := len(own.Stats)
	if len(dst.Stats) != nStats {
		dst.Stats = append(dst.Stats[:0], own.Stats...)
	}
	for j := range nStats {
		v := 0.0
		for k, b := range all {
			x := math.Float64frombits(le.Uint64(b[len(b)-8*(nStats-j):]))
			if k == 0 {
				v = x
			} else {
				v += x
			}
		}
		dst.Stats[j].Name = own.Stats[j].Name
		dst.Stats[j].Value = v / float64(len(all))
	}
	dst.Ticket, dst.Targets, dst.N = own.Ticket, targets, 1
	return nil
}

// check reads message b, learner k's of m, against own and records where
// its parts are (in w.src, nil for a part it does not carry); it returns
// the message's Targets.
func (w *gradWire) check(k, m int, own *algo.Grad, b []byte) (int, error) {
	bad := fmt.Errorf("%w: a gradient message that does not fit the learner", algo.ErrGradShape)
	le := binary.LittleEndian
	if len(b) < 24 {
		return 0, bad
	}
	step, index := int64(le.Uint64(b)), le.Uint64(b[8:])
	if step != own.Step || index != own.Index {
		return 0, fmt.Errorf("%w: update %d at step %d, this learner's is update %d at step %d: the learners' schedules diverged",
			algo.ErrGradShape, index, step, own.Index, own.Step)
	}
	targets := int(le.Uint32(b[16:]))
	if int(le.Uint32(b[20:])) != len(own.Parts) {
		return 0, bad
	}
	o := 24
	for i, p := range own.Parts {
		if len(b)-o < 12 || int(le.Uint32(b[o+8:])) != len(p) || len(b)-o-12 < 4*len(p) {
			return 0, bad
		}
		w.src[i*m+k] = nil
		if le.Uint32(b[o:]) != 0 {
			w.src[i*m+k] = b[o : o+12+4*len(p)]
		}
		o += 12 + 4*len(p)
	}
	if len(b)-o < 4 || int(le.Uint32(b[o:])) != len(own.Stats) || len(b)-o-4 != 8*len(own.Stats) {
		return 0, bad
	}
	return targets, nil
}

// sumInto sets d[j] to the sum of src[k][j] in the order of src,
// starting from 0 as algo.AverageGrads does (so −0 gives +0 there too),
// times 1/n when n > 1.
func sumInto(d []float32, src [][]float32, n int) {
	scale := n > 1
	inv := 1 / float32(n)
	switch len(src) {
	case 0:
		clear(d)
	case 1:
		a := src[0][:len(d)]
		for j := range d {
			s := float32(0)
			s += a[j]
			if scale {
				s *= inv
			}
			d[j] = s
		}
	case 2:
		a, b := src[0][:len(d)], src[1][:len(d)]
		if !scale {
			for j := range d {
				s := float32(0)
				d[j] = s + a[j] + b[j]
			}
			break
		}
		for j := range d {
			s := float32(0)
			d[j] = (s + a[j] + b[j]) * inv
		}
	default:
		for j := range d {
			s := float32(0)
			for _, a := range src {
				s += a[j]
			}
			if scale {
				s *= inv
			}
			d[j] = s
		}
	}
}

// floats returns the float32 values of b: b itself where view can read it
// in place, else a copy decoded into scratch buffer k.
func (w *gradWire) floats(k int, b []byte) []float32 {
	if v, ok := view(b); ok {
		return v
	}
	for len(w.scratch) <= k {
		w.scratch = append(w.scratch, nil)
	}
	v := w.scratch[k][:0]
	for j := 0; j+4 <= len(b); j += 4 {
		v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(b[j:])))
	}
	w.scratch[k] = v
	return v
}

// littleEndian: this machine stores a float32 as the wire does, so a
// message's values can be read and written in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// view returns b as float32s in place, when the machine is little-endian
// and b is aligned for them (a message's values start 4-byte aligned in a
// buffer from make, as this package's and the transports' are); ok is
// false otherwise and the caller converts value by value.
func view(b []byte) (v []float32, ok bool) {
	if !littleEndian || len(b) < 4 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4), true
}
