package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"herd/internal/rng"
	"herd/sample"
)

// planeBatch returns n transitions whose observations are obsSize values
// drawn by pick (0/1 planes, bytes, …), the last tail of them a float
// that no packed encoding holds (as offpolicy's n-step discount).
func planeBatch(r *rand.Rand, n, obsSize, tail, actSize int, pick func(*rand.Rand) float32) *Batch {
	b := &Batch{}
	b.Resize(n, obsSize, actSize)
	for i := range n {
		for j := range obsSize {
			b.Obs[i*obsSize+j], b.NextObs[i*obsSize+j] = pick(r), pick(r)
			if j >= obsSize-tail {
				b.Obs[i*obsSize+j], b.NextObs[i*obsSize+j] = 0, 0.99*r.Float32()
			}
		}
		for j := range actSize {
			b.Action[i*actSize+j] = r.Float32() - 0.5
		}
		b.Reward[i] = r.Float32()
		b.Terminated[i], b.Truncated[i] = r.IntN(3) == 0, r.IntN(4) == 0
	}
	return b
}

func bit(r *rand.Rand) float32   { return float32(r.IntN(2)) }
func byte8(r *rand.Rand) float32 { return float32(r.IntN(256)) }

// sampleRows is everything a Sample returned, as float32 bits.
func sampleRows(s *Sample) []uint32 {
	var out []uint32
	for _, a := range [][]float32{s.Obs, s.NextObs, s.Action, s.Reward, s.Weight} {
		for _, v := range a {
			out = append(out, math.Float32bits(v))
		}
	}
	for i := range s.Len() {
		f := uint32(s.Index[i]) << 2
		if s.Terminated[i] {
			f |= 1
		}
		if s.Truncated[i] {
			f |= 2
		}
		out = append(out, f, uint32(s.Gen[i]))
	}
	return out
}

type encBuffer interface {
	stateful
	storage() *storage
}

func (u *Uniform) storage() *storage     { return u.st }
func (p *Prioritized) storage() *storage { return p.st }

func newEnc(t testing.TB, prioritized bool, cfg Config) encBuffer {
	t.Helper()
	var b encBuffer
	var err error
	if prioritized {
		b, err = NewPrioritized(cfg)
	} else {
		b, err = NewUniform(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPackedSamplesSameBits: buffers storing observations as bits or
// bytes (with and without a float tail) sample exactly the float32 rows a
// float32 buffer driven the same way samples — same draws, same values,
// bit for bit — before and after the ring wraps; the packed records are
// the sizes the layout promises (10×10×4 MinAtar planes: 120 bytes a slot
// against 3,220).
func TestPackedSamplesSameBits(t *testing.T) {
	for _, tc := range []struct {
		enc  sample.ObsEncoding
		tail int
		pick func(*rand.Rand) float32
	}{
		{sample.ObsBits, 0, bit}, {sample.ObsBits, 1, bit},
		{sample.ObsUint8, 0, byte8}, {sample.ObsUint8, 1, byte8}, {sample.ObsUint8, 0, bit},
	} {
		for _, prio := range []bool{false, true} {
			t.Run(fmt.Sprintf("enc=%d/tail=%d/prioritized=%v", tc.enc, tc.tail, prio), func(t *testing.T) {
				base := Config{Capacity: 40, ObsSize: 13, ActSize: 2, ObsFloatTail: tc.tail}
				packedCfg := base
				packedCfg.ObsEncoding = tc.enc
				f, p := newEnc(t, prio, base), newEnc(t, prio, packedCfg)
				data, rf, rp := rand.New(rand.NewPCG(1, 1)), rand.New(rand.NewPCG(2, 2)), rand.New(rand.NewPCG(2, 2))
				var sf, sp Sample
				for k := range 30 {
					b := planeBatch(data, 1+k%5, base.ObsSize, tc.tail, base.ActSize, tc.pick)
					if err := f.Add(b); err != nil {
						t.Fatal(err)
					}
					if err := p.Add(b); err != nil {
						t.Fatal(err)
					}
					n := min(8, f.Len())
					if err := f.Sample(&sf, n, rf); err != nil {
						t.Fatal(err)
					}
					if err := p.Sample(&sp, n, rp); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(sampleRows(&sf), sampleRows(&sp)) {
						t.Fatalf("add %d: the packed buffer sampled other rows than the float32 one", k)
					}
				}
				if l := p.storage().lay.Load(); l.enc != tc.enc {
					t.Fatalf("encoding %d after adding values it holds, want %d", l.enc, tc.enc)
				}
			})
		}
	}
	minatar := Config{Capacity: 1, ObsSize: 400, ObsEncoding: sample.ObsBits}
	float := minatar
	float.ObsEncoding = sample.ObsFloat32
	if b, fb := minatar.SlotBytes(), float.SlotBytes(); b != 120 || fb != 3220 {
		t.Fatalf("MinAtar slot %d B packed, %d B float32; want 120 and 3220", b, fb)
	}
}

// TestPackedWidens: a bit-packed buffer that is given a byte value widens
// to bytes, then, given a fraction (or −0, which no packed encoding
// holds), to float32, keeping every stored transition: it samples what a
// float32 buffer given the same batches samples.
func TestPackedWidens(t *testing.T) {
	for _, odd := range []float32{0.5, float32(math.Copysign(0, -1))} {
		t.Run(fmt.Sprint(odd), func(t *testing.T) {
			base := Config{Capacity: 30, ObsSize: 9, ObsFloatTail: 1}
			packedCfg := base
			packedCfg.ObsEncoding = sample.ObsBits
			f, p := newEnc(t, true, base), newEnc(t, true, packedCfg)
			data, rf, rp := rand.New(rand.NewPCG(3, 3)), rand.New(rand.NewPCG(4, 4)), rand.New(rand.NewPCG(4, 4))
			var sf, sp Sample
			want := []sample.ObsEncoding{sample.ObsBits, sample.ObsUint8, sample.ObsFloat32}
			for k := range 24 {
				b := planeBatch(data, 3, base.ObsSize, 1, 1, bit)
				switch k {
				case 8:
					b.NextObs[4] = 7
				case 16:
					b.Obs[base.ObsSize+2] = odd
				}
				for _, buf := range []encBuffer{f, p} {
					if err := buf.Add(b); err != nil {
						t.Fatal(err)
					}
				}
				if got := p.storage().lay.Load().enc; got != want[k/8] {
					t.Fatalf("add %d: encoding %d, want %d", k, got, want[k/8])
				}
				if err := f.Sample(&sf, min(10, f.Len()), rf); err != nil {
					t.Fatal(err)
				}
				if err := p.Sample(&sp, min(10, f.Len()), rp); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(sampleRows(&sf), sampleRows(&sp)) {
					t.Fatalf("add %d: the widened buffer sampled other rows than the float32 one", k)
				}
			}
		})
	}
}

// TestPackedStateRoundTrip: a bit-packed buffer's state restores into a
// fresh one (the same bytes saved again, the same draws after), and into
// a float32-configured one, which keeps its float32 records and samples
// the same rows.
func TestPackedStateRoundTrip(t *testing.T) {
	for _, prio := range []bool{false, true} {
		cfg := Config{Capacity: 25, ObsSize: 11, ObsFloatTail: 1, ObsEncoding: sample.ObsBits}
		a := newEnc(t, prio, cfg)
		data := rand.New(rand.NewPCG(5, 5))
		for range 12 { // wraps
			if err := a.Add(planeBatch(data, 3, 11, 1, 1, bit)); err != nil {
				t.Fatal(err)
			}
		}
		st, err := a.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		b := newEnc(t, prio, cfg)
		floatCfg := cfg
		floatCfg.ObsEncoding = sample.ObsFloat32
		c := newEnc(t, prio, floatCfg)
		for _, x := range []encBuffer{b, c} {
			if err := x.UnmarshalBinary(st); err != nil {
				t.Fatal(err)
			}
		}
		if again, _ := b.MarshalBinary(); !bytes.Equal(again, st) {
			t.Fatal("the restored buffer saves another state")
		}
		if c.storage().lay.Load().enc != sample.ObsFloat32 {
			t.Fatal("a float32 buffer restored a packed state as packed")
		}
		ra, rb, rc := rand.New(rand.NewPCG(6, 6)), rand.New(rand.NewPCG(6, 6)), rand.New(rand.NewPCG(6, 6))
		var sa, sb, sc Sample
		for range 10 {
			_ = a.Sample(&sa, 8, ra)
			_ = b.Sample(&sb, 8, rb)
			_ = c.Sample(&sc, 8, rc)
			if x := sampleRows(&sa); !slices.Equal(x, sampleRows(&sb)) || !slices.Equal(x, sampleRows(&sc)) {
				t.Fatal("a restored buffer samples other rows")
			}
		}
	}
}

// v1State rewrites a float32 buffer's state (version 2) as version 1
// wrote it: the same records after a header of capacity, words per
// record and the two counters.
func v1State(t *testing.T, st []byte, prio bool) []byte {
	t.Helper()
	pre := 2
	if prio {
		pre = 26
	}
	h := st[pre:]
	if h[20] != byte(sample.ObsFloat32) {
		t.Fatal("not a float32 state")
	}
	obs, act := binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
	out := slices.Clone(st[:pre])
	out[1] = 1
	out = append(out, h[:8]...)
	out = binary.LittleEndian.AppendUint32(out, 2*obs+act+2)
	out = append(out, h[21:37]...)
	return append(out, h[stateHeader:]...)
}

// TestStateVersion1: a version-1 state (float32 records) restores into a
// bit-packed buffer, which then holds its binary observations packed and
// continues as the float32 original does; one holding a fraction
// restores widened to float32. A packed head with bits set past its last
// value is refused with ErrState.
func TestStateVersion1(t *testing.T) {
	for _, prio := range []bool{false, true} {
		for _, odd := range []bool{false, true} {
			floatCfg := Config{Capacity: 20, ObsSize: 10, ObsFloatTail: 1}
			a := newEnc(t, prio, floatCfg)
			data := rand.New(rand.NewPCG(7, 7))
			for k := range 9 {
				b := planeBatch(data, 3, 10, 1, 1, bit)
				if odd && k == 7 {
					b.Obs[3] = 0.25
				}
				if err := a.Add(b); err != nil {
					t.Fatal(err)
				}
			}
			st, _ := a.MarshalBinary()
			old := v1State(t, st, prio)
			packedCfg := floatCfg
			packedCfg.ObsEncoding = sample.ObsBits
			b := newEnc(t, prio, packedCfg)
			if err := b.UnmarshalBinary(old); err != nil {
				t.Fatal(err)
			}
			want := sample.ObsBits
			if odd {
				want = sample.ObsFloat32
			}
			if got := b.storage().lay.Load().enc; got != want {
				t.Fatalf("prioritized=%v odd=%v: restored as encoding %d, want %d", prio, odd, got, want)
			}
			ra, rb := rand.New(rand.NewPCG(8, 8)), rand.New(rand.NewPCG(8, 8))
			var sa, sb Sample
			for k := range 10 {
				nb := planeBatch(data, 2, 10, 1, 1, bit)
				_ = a.Add(nb)
				_ = b.Add(nb)
				_ = a.Sample(&sa, 8, ra)
				_ = b.Sample(&sb, 8, rb)
				if !slices.Equal(sampleRows(&sa), sampleRows(&sb)) {
					t.Fatalf("prioritized=%v odd=%v: step %d after restoring version 1: other rows", prio, odd, k)
				}
			}
		}
	}
	// Bits past the last value of a packed head (10 − 1 = 9 values:
	// 2 bytes, 7 bits unused).
	cfg := Config{Capacity: 4, ObsSize: 10, ObsFloatTail: 1, ObsEncoding: sample.ObsBits}
	u := newEnc(t, false, cfg)
	if err := u.Add(planeBatch(rand.New(rand.NewPCG(9, 9)), 1, 10, 1, 1, bit)); err != nil {
		t.Fatal(err)
	}
	st, _ := u.MarshalBinary()
	st[2+stateHeader+8+1] |= 0x80 // slot 0, obs head, second byte
	if err := newEnc(t, false, cfg).UnmarshalBinary(st); !errors.Is(err, ErrState) {
		t.Fatalf("corrupt head: %v, want ErrState", err)
	}
}

// widenValue is observation value j of transition id in
// TestWidenConcurrent: 0/1 for the first ids, bytes from id 3000 on,
// fractions from id 6000 on.
func widenValue(id, j int) float32 {
	h := uint32(id*2654435761) ^ uint32(j*40503)
	switch {
	case id < 3000:
		return float32(h >> 7 & 1)
	case id < 6000:
		return float32(h >> 5 & 255)
	}
	return float32(h>>9&1023) / 64
}

// TestWidenConcurrent: actors insert while learners sample a small
// bit-packed ring whose values, as the ids grow, need bytes and then
// float32, so the buffer widens twice with copies in and out running;
// every sampled row holds its own transition's values (no torn or
// misconverted read). Run it with -race.
func TestWidenConcurrent(t *testing.T) {
	const capacity, obs = 700, 10
	for _, tc := range []struct {
		prio bool
		lock Locking
	}{{false, TwoLock}, {true, TwoLock}, {true, GlobalLock}} {
		t.Run(fmt.Sprintf("prioritized=%v/%s", tc.prio, tc.lock), func(t *testing.T) {
			buf := newEnc(t, tc.prio, Config{Capacity: capacity, ObsSize: obs, ObsEncoding: sample.ObsBits, Locking: tc.lock})
			var ids, batches, bad, sampled atomic.Int64
			var done atomic.Bool
			var wg, actors sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				if g < 2 {
					actors.Add(1)
				}
				go func() {
					defer wg.Done()
					r := rng.New(7, "replay/test/widen", g)
					var s Sample
					for g < 2 && ids.Load() < 9000 {
						n := 1 + r.IntN(20)
						first := int(ids.Add(int64(n))) - n
						b := &Batch{}
						b.Resize(n, obs, 1)
						for i := range n {
							for j := range obs {
								b.Obs[i*obs+j], b.NextObs[i*obs+j] = widenValue(first+i, j), widenValue(first+i, j+obs)
							}
							b.Reward[i] = float32(first + i)
						}
						if err := buf.Add(b); err != nil {
							bad.Add(1)
						}
						// Learners keep up (a sample per 8 batches), so
						// they sample in every phase, on any scheduler.
						for n := batches.Add(1); sampled.Load() < n/8 && !done.Load(); {
							runtime.Gosched()
						}
					}
					if g < 2 {
						actors.Done()
						return
					}
					for !done.Load() {
						if buf.Len() < 32 {
							runtime.Gosched()
							continue
						}
						if err := buf.Sample(&s, 32, r); err != nil {
							bad.Add(1)
							continue
						}
						for i := range s.Len() {
							id := int(s.Reward[i])
							for j := range obs {
								if s.Obs[i*obs+j] != widenValue(id, j) || s.NextObs[i*obs+j] != widenValue(id, j+obs) {
									bad.Add(1)
								}
							}
						}
						sampled.Add(1)
					}
				}()
			}
			actors.Wait()
			done.Store(true)
			wg.Wait()
			if bad.Load() != 0 {
				t.Fatalf("%d bad rows or failed calls", bad.Load())
			}
			if enc := buf.storage().lay.Load().enc; enc != sample.ObsFloat32 || sampled.Load() < batches.Load()/8 {
				t.Fatalf("encoding %d after fractions, %d samples", enc, sampled.Load())
			}
		})
	}
}
