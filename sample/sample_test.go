package sample

import (
	"errors"
	"reflect"
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
	v[4] = 2
	if _, err := DecodeSegment(v); !errors.Is(err, ErrVersion) {
		t.Fatalf("format 2: %v, want ErrVersion", err)
	}
}

func FuzzDecodeSegment(f *testing.F) {
	b, _ := filledSegment().AppendEncode(nil)
	f.Add(b)
	f.Add(b[:headerSize])
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
