package worker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"herd/algo"
	"herd/transport"
)

// gradWire is a learner's side of the gradient exchange of a group
// (exchange): over messages, it encodes its gradient into one and
// averages the group's messages straight into a gradient; learners in one
// process average in place (averageShared). Both give, in learner-id
// order, the bits of algo.AverageGrads over the learners' gradients. The
// exchange runs once per optimizer step (every minibatch), so it avoids
// what a decode into M gradients followed by AverageGrads costs: M + 2
// more passes over the model and a fresh buffer per message.
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
	// sharedMin is the least number of values for which learners that
	// share memory average in place (LearnerGroup.SharedMin, resolved).
	sharedMin int
	// views are the messages read in place (view), gs the group's
	// gradients being averaged, dsts where averageShared writes, mine
	// what this learner shares; m the update's counts and stats; vals
	// the values summed for one part; scratch the decoded copies where
	// a message's bytes cannot be read in place (see floats).
	views   []algo.Grad
	gs      []*algo.Grad
	dsts    []*algo.Grad
	mine    shared
	m       merged
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

// exchange sets dst to the group's average of every learner's own
// (own is this learner's gradient of the update; dst may be own). Over a
// transport.Sharer (learners in one process) the learners average in place
// (averageShared); else each sends its gradient and averages the M
// messages itself (average).
func (w *gradWire) exchange(ctx context.Context, c transport.Collective, dst, own *algo.Grad) error {
	if s, ok := c.(transport.Sharer); ok && values(own) >= w.sharedMin {
		return w.averageShared(ctx, s, dst, own)
	}
	all, err := c.AllGather(ctx, w.encode(own))
	if err != nil {
		return err
	}
	return w.average(dst, own, all)
}

// average sets dst to the average of the group's messages all (learner-id
// order) as one update: each part the mean over the messages that carry
// it (Has 1 when any does, else 0 and zeros), Steps and Targets the
// largest, Stats the mean, N 1 and own's ticket. own is this learner's
// gradient of the same update, which all must fit: its shape, its stats
// and its ticket (another ticket means the learners' schedules diverged).
// dst may be own.
func (w *gradWire) average(dst, own *algo.Grad, all [][]byte) error {
	if err := sameShape(dst, own); err != nil {
		return err
	}
	// Read every message before dst changes (it may be own, whose shape
	// the checks read).
	for len(w.views) < len(all) {
		w.views = append(w.views, algo.Grad{})
	}
	w.gs = w.gs[:0]
	for k, b := range all {
		if err := w.view(&w.views[k], k, own, b); err != nil {
			return fmt.Errorf("learner %d's gradient: %w", k, err)
		}
		w.gs = append(w.gs, &w.views[k])
	}
	w.m.of(w.gs)
	w.values(dst, w.gs, 0, math.MaxInt)
	w.m.apply(dst, own)
	return nil
}

// shared is what a learner hands the others in averageShared: its
// gradient and where its average goes.
type shared struct{ dst, own *algo.Grad }

// DefaultSharedMin is LearnerGroup.SharedMin's default: averaging in
// place costs a second round, a wake-up per optimizer step, which a model
// that stays in the core's caches does not win back (PPO's 64-unit
// CartPole MLP, 9k values, spends more CPU that way; the 512-unit one,
// 530k, less).
const DefaultSharedMin = 1 << 16

// values is the number of values in g's parts.
func values(g *algo.Grad) int {
	n := 0
	for _, p := range g.Parts {
		n += len(p)
	}
	return n
}

// averageShared is average for learners that share memory: each hands the
// others its gradient and its dst (one Share round), sums its 1/M of the
// model's values from every learner's gradient, in learner-id order with
// the bits of average, into every learner's dst, and a second round tells
// it the others' shares are in. The messages' encoding, copies and the M
// passes over the whole model each learner takes in average are gone: each
// value is summed once for the group. Between the two rounds a learner
// writes only its share of the values, so that every gradient's Has,
// Steps and Stats stay as the others read them; its own dst's are set
// after the second.
func (w *gradWire) averageShared(ctx context.Context, s transport.Sharer, dst, own *algo.Grad) error {
	if err := sameShape(dst, own); err != nil {
		return err
	}
	w.mine = shared{dst: dst, own: own}
	all, err := s.Share(ctx, &w.mine)
	if err != nil {
		return err
	}
	id := -1
	w.gs, w.dsts = w.gs[:0], w.dsts[:0]
	for k, v := range all {
		x, ok := v.(*shared)
		if !ok {
			return fmt.Errorf("%w: learner %d shared a %T, not a gradient", algo.ErrGradShape, k, v)
		}
		if x == &w.mine {
			id = k
		}
		err := sameTicket(own, x.own)
		if err == nil {
			err = errors.Join(sameShape(x.own, own), sameShape(x.dst, own))
		}
		if err == nil && len(x.own.Stats) != len(own.Stats) {
			err = fmt.Errorf("%w: %d stats, this learner's %d", algo.ErrGradShape, len(x.own.Stats), len(own.Stats))
		}
		if err != nil {
			return fmt.Errorf("learner %d's gradient: %w", k, err)
		}
		w.gs, w.dsts = append(w.gs, x.own), append(w.dsts, x.dst)
	}
	if id < 0 {
		return fmt.Errorf("%w: this learner's gradient is not among the group's", algo.ErrGradShape)
	}
	w.m.of(w.gs)
	total := values(own)
	m := len(all)
	lo, hi := id*total/m, (id+1)*total/m
	w.values(dst, w.gs, lo, hi)
	// Copied after, not stored into every dst inside sumInto's loop: a
	// second store stream there took 3x the CPU of sum and copy
	// (BenchmarkReducer530k), the copy being one memmove.
	for k, d := range w.dsts {
		if k != id {
			copyRange(d, dst, lo, hi)
		}
	}
	if _, err := s.Share(ctx, nil); err != nil {
		return err
	}
	w.m.apply(dst, own)
	return nil
}

// merged is the group's update besides its values: per part the count of
// gradients that carry it and the most steps among them, the most
// Targets, the mean of each of the Stats.
type merged struct {
	has, steps []int
	targets    int
	stats      []float64
}

// of sets m from the group's gradients gs (learner-id order).
func (m *merged) of(gs []*algo.Grad) {
	n := len(gs[0].Parts)
	m.has, m.steps = resize(m.has, n), resize(m.steps, n)
	for i := range n {
		h, steps := 0, 0
		for _, g := range gs {
			if g.Has[i] != 0 {
				h += g.Has[i]
				steps = max(steps, g.Steps[i])
			}
		}
		m.has[i], m.steps[i] = h, steps
	}
	m.targets = 0
	for _, g := range gs {
		m.targets = max(m.targets, g.Targets)
	}
	m.stats = m.stats[:0]
	for j := range gs[0].Stats {
		v := 0.0
		for k, g := range gs {
			if x := g.Stats[j].Value; k == 0 {
				v = x
			} else {
				v += x
			}
		}
		m.stats = append(m.stats, v/float64(len(gs)))
	}
}

// apply sets dst's Has, Steps, Stats (named as own's), Ticket (own's),
// Targets and N (1) from m.
func (m *merged) apply(dst, own *algo.Grad) {
	for i := range dst.Parts {
		dst.Has[i], dst.Steps[i] = min(m.has[i], 1), m.steps[i]
	}
	if len(dst.Stats) != len(own.Stats) {
		dst.Stats = append(dst.Stats[:0], own.Stats...)
	}
	for j, v := range m.stats {
		dst.Stats[j] = algo.Stat{Name: own.Stats[j].Name, Value: v}
	}
	dst.Ticket, dst.Targets, dst.N = own.Ticket, m.targets, 1
}

// values sets dst's values at the flat positions [lo, hi) of the model
// (its parts one after another) to the mean over the gradients gs that
// carry each part, summed in the order of gs (sumInto), with the counts
// m.of found.
func (w *gradWire) values(dst *algo.Grad, gs []*algo.Grad, lo, hi int) {
	off := 0
	for i, d := range dst.Parts {
		a, b := max(lo, off)-off, min(hi, off+len(d))-off
		off += len(d)
		if a >= b {
			continue
		}
		w.vals = w.vals[:0]
		for _, g := range gs {
			if g.Has[i] != 0 {
				w.vals = append(w.vals, g.Parts[i][a:b])
			}
		}
		sumInto(d[a:b], w.vals, w.m.has[i])
	}
}

// copyRange copies src's values at the flat positions [lo, hi) into dst.
func copyRange(dst, src *algo.Grad, lo, hi int) {
	off := 0
	for i, s := range src.Parts {
		a, b := max(lo, off)-off, min(hi, off+len(s))-off
		off += len(s)
		if a < b {
			copy(dst.Parts[i][a:b], s[a:b])
		}
	}
}

// sameShape reports whether g has own's parts, each of own's length.
func sameShape(g, own *algo.Grad) error {
	if len(g.Parts) != len(own.Parts) || len(g.Has) != len(own.Parts) || len(g.Steps) != len(own.Parts) {
		return fmt.Errorf("%w: a gradient of %d parts into one of %d", algo.ErrGradShape, len(own.Parts), len(g.Parts))
	}
	for i, p := range own.Parts {
		if len(g.Parts[i]) != len(p) {
			return fmt.Errorf("%w: part %d of %d values, this learner's of %d", algo.ErrGradShape, i, len(g.Parts[i]), len(p))
		}
	}
	return nil
}

// sameTicket reports whether g, another learner's gradient, is of own's
// update.
func sameTicket(own, g *algo.Grad) error {
	if g.Step != own.Step || g.Index != own.Index {
		return fmt.Errorf("%w: update %d at step %d, this learner's is update %d at step %d: the learners' schedules diverged",
			algo.ErrGradShape, g.Index, g.Step, own.Index, own.Step)
	}
	return nil
}

// errMessageShape is view's error for a message that does not fit: made
// once, since view runs for every message of every round.
var errMessageShape = fmt.Errorf("%w: a gradient message that does not fit the learner", algo.ErrGradShape)

// view sets g to message b, learner k's, read in place: its parts are
// views of b's values (nil where the message does not carry the part).
// b must fit own: its shape, its stats and its ticket.
func (w *gradWire) view(g *algo.Grad, k int, own *algo.Grad, b []byte) error {
	bad := errMessageShape
	le := binary.LittleEndian
	if len(b) < 24 {
		return bad
	}
	g.Step, g.Index = int64(le.Uint64(b)), le.Uint64(b[8:])
	if err := sameTicket(own, g); err != nil {
		return err
	}
	g.Targets = int(le.Uint32(b[16:]))
	if int(le.Uint32(b[20:])) != len(own.Parts) {
		return bad
	}
	n := len(own.Parts)
	g.Parts, g.Has, g.Steps = resize(g.Parts, n), resize(g.Has, n), resize(g.Steps, n)
	o := 24
	for i, p := range own.Parts {
		if len(b)-o < 12 || int(le.Uint32(b[o+8:])) != len(p) || len(b)-o-12 < 4*len(p) {
			return bad
		}
		g.Has[i], g.Steps[i], g.Parts[i] = int(le.Uint32(b[o:])), int(le.Uint32(b[o+4:])), nil
		if g.Has[i] != 0 {
			g.Parts[i] = w.floats(k*n+i, b[o+12:o+12+4*len(p)])
		}
		o += 12 + 4*len(p)
	}
	if len(b)-o < 4 || int(le.Uint32(b[o:])) != len(own.Stats) || len(b)-o-4 != 8*len(own.Stats) {
		return bad
	}
	o += 4
	g.Stats = resize(g.Stats, len(own.Stats))
	for j := range g.Stats {
		g.Stats[j].Value = math.Float64frombits(le.Uint64(b[o+8*j:]))
	}
	return nil
}

// resize returns s with length n, its elements kept where they fit.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return append(s[:cap(s)], make([]T, n-cap(s))...)
	}
	return s[:n]
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
