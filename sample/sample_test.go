package sample

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"herd/internal/rng"
)

func filledSegment() *Segment {
	s := NewSegment(3, 2, 4, 1)
	r := rng.New(1, "sample/test", 0)
	for _, a := range s.arrays() {
		for i := range a {
			a[i] = r.Float32()
		}
	}
	s.Version, s.Worker = 9, 3
	s.Episodes = []Episode{{Return: 21.5, Length: 22, At: 1}}
	return s
}

func filledTransitions(prio bool) *Transitions {
	s := NewTransitions(5, 3, 2)
	if prio {
		s.Priorities = make([]float32, 5)
	}
	r := rng.New(1, "sample/test", 1)
	for _, a := range s.arrays() {
		for i := range a {
			a[i] = r.Float32()
		}
	}
	s.Version, s.Worker = 4, 1
	return s
}

func TestSegmentRoundTrip(t *testing.T) {
	s := filledSegment()
	b, err := s.AppendEncode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := Kind(b); k != "segment" {
		t.Fatalf("Kind = %q", k)
	}
	got, err := DecodeSegment(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip changed the segment:\n got %+v\nwant %+v", got, s)
	}
	if _, err := DecodeTransitions(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decoding a segment as transitions: %v", err)
	}
}

func TestTransitionsRoundTrip(t *testing.T) {
	for _, prio := range []bool{false, true} {
		s := filledTransitions(prio)
		b, err := s.AppendEncode(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTransitions(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("prio=%v: round trip changed the transitions:\n got %+v\nwant %+v", prio, got, s)
		}
	}
}

func TestEncodeChecksShapes(t *testing.T) {
	s := filledSegment()
	s.Values = s.Values[:1]
	if _, err := s.AppendEncode(nil); !errors.Is(err, ErrShape) {
		t.Fatalf("encoding a short Values: %v, want ErrShape", err)
	}
	tr := filledTransitions(true)
	tr.Priorities = tr.Priorities[:2]
	if _, err := tr.AppendEncode(nil); !errors.Is(err, ErrShape) {
		t.Fatalf("encoding short priorities: %v, want ErrShape", err)
	}
}

func TestDecodeRejectsBadBytes(t *testing.T) {
	b, _ := filledSegment().AppendEncode(nil)
	for n := range len(b) {
		if _, err := DecodeSegment(b[:n]); err == nil {
			t.Fatalf("decoding the first %d of %d bytes succeeded", n, len(b))
		}
	}
	if _, err := DecodeSegment(append(append([]byte{}, b...), 0)); err == nil {
		t.Fatal("decoding with a trailing byte succeeded")
	}
	v := append([]byte{}, b...)
	v[4] = FormatVersion + 1
	if _, err := DecodeSegment(v); !errors.Is(err, ErrVersion) {
		t.Fatalf("format %d: %v, want ErrVersion", FormatVersion+1, err)
	}
}

// Observations travel as bits when every value is 0 or 1, as bytes when
// every value is an integer in 0…255, and as float32 otherwise; every
// encoding decodes to the same bits, and bytes that are not the canonical
// encoding of their values are refused.
func TestPackedObservations(t *testing.T) {
	const T, N, D = 4, 2, 100 // MinAtar-sized frames: 10×10×1
	plain, _ := NewSegment(T, N, D, 1).AppendEncode(nil)
	for _, c := range []struct {
		name  string
		value func(i int) float32
		flags uint8
		bytes int // of the observation arrays
	}{
		{"binary planes", func(i int) float32 { return float32(i * 7 % 3 / 2) }, obsBits, (T*N*D+7)/8 + (N*D+7)/8},
		{"pixels", func(i int) float32 { return float32(i * 37 % 256) }, obsUint8, T*N*D + N*D},
		{"floats", func(i int) float32 { return float32(i) / 3 }, 0, 4 * (T*N*D + N*D)},
		{"negative zero", func(i int) float32 {
			if i == 5 {
				return float32(math.Copysign(0, -1))
			}
			return 1
		}, 0, 4 * (T*N*D + N*D)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSegment(T, N, D, 1)
			for i := range s.Obs {
				s.Obs[i] = c.value(i)
			}
			for i := range s.NextObs {
				s.NextObs[i] = c.value(i + 1)
			}
			b, err := s.AppendEncode(nil)
			if err != nil {
				t.Fatal(err)
			}
			if b[7]&obsMask != c.flags {
				t.Errorf("flags %#x, want observation encoding %#x", b[7], c.flags)
			}
			if got, want := len(b)-len(plain), c.bytes-(T*N*D+7)/8-(N*D+7)/8; got != want {
				t.Errorf("%d bytes more than all-zero frames (bits), want %d", got, want)
			}
			d, err := DecodeSegment(b)
			if err != nil {
				t.Fatal(err)
			}
			for i := range s.Obs {
				if math.Float32bits(d.Obs[i]) != math.Float32bits(s.Obs[i]) {
					t.Fatalf("obs[%d] = %v, sent %v", i, d.Obs[i], s.Obs[i])
				}
			}
			if !slices.Equal(d.NextObs, s.NextObs) {
				t.Fatal("next observations differ")
			}
			tr := NewTransitions(N, D, 1)
			copy(tr.Obs, s.Obs)
			copy(tr.NextObs, s.NextObs)
			tb, err := tr.AppendEncode(nil)
			if err != nil {
				t.Fatal(err)
			}
			dt, err := DecodeTransitions(tb)
			if err != nil || !slices.Equal(dt.Obs, tr.Obs) || !slices.Equal(dt.NextObs, tr.NextObs) || tb[7]&obsMask != c.flags {
				t.Fatalf("transitions: err %v, flags %#x", err, tb[7])
			}
		})
	}
	// All-zero frames are bits; the same values as bytes or floats are
	// not their encoding, and a stray bit past the end is refused.
	if plain[7]&obsMask != obsBits {
		t.Fatalf("zero frames: flags %#x", plain[7])
	}
	s := NewSegment(1, 1, 3, 1)
	b, _ := s.AppendEncode(nil)
	stray := slices.Clone(b)
	stray[headerSize] |= 1 << 5
	if _, err := DecodeSegment(stray); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a bit past the end: %v, want ErrCorrupt", err)
	}
	asBytes := slices.Clone(b[:headerSize])
	asBytes[7] = asBytes[7]&^obsMask | obsUint8
	asBytes = append(asBytes, 0, 0, 0)
	asBytes = append(asBytes, b[headerSize+1:headerSize+1+4*4]...) // actions … dones
	asBytes = append(asBytes, 0, 0, 0)
	asBytes = append(asBytes, b[headerSize+1+4*4+1:]...)
	if _, err := DecodeSegment(asBytes); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "encoding") {
		t.Errorf("zeros sent as bytes: %v, want ErrCorrupt naming the encoding", err)
	}
}

func FuzzDecodeSegment(f *testing.F) {
	b, _ := filledSegment().AppendEncode(nil)
	f.Add(b)
	f.Add(b[:headerSize])
	withState, _ := stateSegment().AppendEncode(nil)
	f.Add(withState)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSegment(data)
		if err != nil {
			return
		}
		if err := s.Check(); err != nil {
			t.Fatalf("decoded a segment that fails Check: %v", err)
		}
		again, err := s.AppendEncode(nil)
		if err != nil || string(again) != string(data) {
			t.Fatalf("re-encoding differs (err %v)", err)
		}
	})
}

func FuzzDecodeTransitions(f *testing.F) {
	for _, prio := range []bool{false, true} {
		b, _ := filledTransitions(prio).AppendEncode(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeTransitions(data)
		if err != nil {
			return
		}
		if err := s.Check(); err != nil {
			t.Fatalf("decoded transitions that fail Check: %v", err)
		}
	})
}

func BenchmarkSegmentEncodeDecode(b *testing.B) {
	s := NewSegment(128, 4, 4, 1) // PPO CartPole's rollout
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = s.AppendEncode(buf[:0])
		if _, err := DecodeSegment(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func TestSegmentVersionsRoundTrip(t *testing.T) {
	s := filledSegment()
	s.Versions = []uint64{10, 9, 12}
	b, err := s.AppendEncode(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSegment(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip changed the segment:\n got %+v\nwant %+v", got.Versions, s.Versions)
	}
	for _, bad := range [][]uint64{{9, 9}, {8, 9, 9}, {10, 12, 11}, {9, 9, 9 + 1<<25}} {
		s.Versions = bad
		if _, err := s.AppendEncode(nil); !errors.Is(err, ErrShape) {
			t.Errorf("versions %v encoded: %v", bad, err)
		}
	}
}

// stateSegment is filledSegment with a recurrent state of width 3 per env
// and per-step versions.
func stateSegment() *Segment {
	s := filledSegment()
	s.Versions = []uint64{9, 10, 9}
	s.State = []float32{0.5, -1, 2, 0, 0, 0}
	return s
}

// A segment's recurrent state travels in format 3 and comes back bit for
// bit; a stateless segment stays format 2, so its bytes are those of a
// build without states; a format 3 message without a state, a format 2
// one with the state flag, and states that are not a row per env are
// refused.
func TestSegmentStateRoundTrip(t *testing.T) {
	s := stateSegment()
	b, err := s.AppendEncode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := binary.LittleEndian.Uint16(b[4:]); f != 3 {
		t.Errorf("a segment with a state is format %d, want 3", f)
	}
	got, err := DecodeSegment(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip changed the segment:\n got %+v\nwant %+v", got, s)
	}
	plain, _ := filledSegment().AppendEncode(nil)
	if f := binary.LittleEndian.Uint16(plain[4:]); f != 2 {
		t.Errorf("a stateless segment is format %d, want 2", f)
	}
	if len(b) != len(plain)+4+4*3+4*len(s.State) {
		t.Errorf("%d bytes with state, %d without: want the width, the version offsets and the state more", len(b), len(plain))
	}
	wrong := append([]byte{}, b...)
	binary.LittleEndian.PutUint16(wrong[4:], 2)
	if _, err := DecodeSegment(wrong); !errors.Is(err, ErrCorrupt) {
		t.Errorf("format 2 with a state: %v, want ErrCorrupt", err)
	}
	wrong = append([]byte{}, plain...)
	binary.LittleEndian.PutUint16(wrong[4:], 3)
	if _, err := DecodeSegment(wrong); !errors.Is(err, ErrCorrupt) {
		t.Errorf("format 3 without a state: %v, want ErrCorrupt", err)
	}
	wrong = append([]byte{}, b...)
	binary.LittleEndian.PutUint32(wrong[headerSize:], 0)
	if _, err := DecodeSegment(wrong); !errors.Is(err, ErrCorrupt) {
		t.Errorf("state width 0: %v, want ErrCorrupt", err)
	}
	s.State = s.State[:5]
	if _, err := s.AppendEncode(nil); !errors.Is(err, ErrShape) {
		t.Errorf("5 state values for 2 envs: %v, want ErrShape", err)
	}
}
