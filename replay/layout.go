package replay

import (
	"unsafe"

	"herd/sample"
)

// layout is how a storage record holds one transition, in 32-bit words:
//
//	ObsFloat32:       [obs | next_obs | action | reward | flags]
//	ObsUint8, ObsBits: [obs head | next_obs head | pad | obs tail | next_obs tail | action | reward | flags]
//
// A head is an observation's first obsSize − tail values in the
// encoding of package sample (the one the wire uses: a byte per value,
// or one bit per value LSB-first), the two heads packed together into
// ⌈2·headBytes/4⌉ words, zero-padded; a tail is the observation's last
// tail values (Config.ObsFloatTail), float32 whatever the encoding.
// Actions and rewards are float32, flags a float32 holding the
// terminated and truncated bits. A layout is never changed once stored
// in a storage (widen makes a new one), so it is read without locks;
// rec, its records, is guarded by the storage's stripes.
type layout struct {
	enc       sample.ObsEncoding
	obsSize   int
	actSize   int
	head      int // values of an observation in the head: obsSize for ObsFloat32
	tail      int // float32 values after the head: 0 for ObsFloat32
	headBytes int // bytes of one observation's head: sample.ObsBytes(head, enc)
	headWords int // words of both heads: 2·obsSize for ObsFloat32
	stride    int // words per record
	rec       []float32
}

// newLayout returns the layout (without records) of observations of
// obsSize values, the last tail of them float32, in encoding enc.
func newLayout(enc sample.ObsEncoding, obsSize, tail, actSize int) *layout {
	l := &layout{enc: enc, obsSize: obsSize, actSize: actSize, head: obsSize - tail, tail: tail}
	if enc == sample.ObsFloat32 {
		l.head, l.tail = obsSize, 0
	}
	l.headBytes = sample.ObsBytes(l.head, enc)
	l.headWords = (2*l.headBytes + 3) / 4
	l.stride = l.headWords + 2*l.tail + actSize + 2
	return l
}

// slotBytes is what one slot takes: its record and its generation.
func (l *layout) slotBytes() int { return 4*l.stride + 8 }

// record returns slot's words.
func (l *layout) record(slot int) []float32 { return l.rec[slot*l.stride : (slot+1)*l.stride] }

// headWordBytes returns the bytes of a record's headWords words, which
// hold its packed heads and their padding (not ObsFloat32).
func (l *layout) headWordBytes(r []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(r))), 4*l.headWords)
}

// Flags word values.
const (
	flagTerminated = 1
	flagTruncated  = 2
)

// put writes row i of b into record r; the layout's encoding holds the
// row's observations (storage.checkAdd).
func (l *layout) put(r []float32, b *Batch, i int) {
	o, a := l.obsSize, l.actSize
	obs, next := b.Obs[i*o:(i+1)*o], b.NextObs[i*o:(i+1)*o]
	if l.enc == sample.ObsFloat32 {
		copySmall(r[:o], obs)
		copySmall(r[o:2*o], next)
	} else {
		h, hb, t := l.head, l.headBytes, l.tail
		p := l.headWordBytes(r)
		// Appending within the capacity writes in place.
		sample.AppendObs(p[:0:hb], obs[:h], l.enc)
		sample.AppendObs(p[hb:hb:2*hb], next[:h], l.enc)
		w := r[l.headWords:]
		copySmall(w[:t], obs[h:])
		copySmall(w[t:2*t], next[h:])
	}
	w := r[l.headWords+2*l.tail:]
	copySmall(w[:a], b.Action[i*a:(i+1)*a])
	w[a] = b.Reward[i]
	f := float32(0)
	if b.Terminated[i] {
		f += flagTerminated
	}
	if b.Truncated[i] {
		f += flagTruncated
	}
	w[a+1] = f
}

// get writes record r into row i of b. Its error, for packed heads with
// bits set past their last value, can only come from a record put did
// not write (a loaded state).
func (l *layout) get(r []float32, b *Batch, i int) error {
	o, a := l.obsSize, l.actSize
	obs, next := b.Obs[i*o:(i+1)*o], b.NextObs[i*o:(i+1)*o]
	if l.enc == sample.ObsFloat32 {
		copySmall(obs, r[:o])
		copySmall(next, r[o:2*o])
	} else {
		h, hb, t := l.head, l.headBytes, l.tail
		p := l.headWordBytes(r)
		err := sample.DecodeObs(obs[:h], p[:hb], l.enc)
		if err2 := sample.DecodeObs(next[:h], p[hb:2*hb], l.enc); err == nil {
			err = err2
		}
		if err != nil {
			return err
		}
		w := r[l.headWords:]
		copySmall(obs[h:], w[:t])
		copySmall(next[h:], w[t:2*t])
	}
	w := r[l.headWords+2*l.tail:]
	copySmall(b.Action[i*a:(i+1)*a], w[:a])
	b.Reward[i] = w[a]
	f := int(w[a+1])
	b.Terminated[i] = f&flagTerminated != 0
	b.Truncated[i] = f&flagTruncated != 0
	return nil
}
