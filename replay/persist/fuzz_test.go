package persist

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// FuzzManifest feeds arbitrary bytes to the snapshot manifest decoder: it
// must return a manifest or an error wrapping ErrCorrupt, never panic, and
// a manifest it accepts must survive an encode/decode round trip.
func FuzzManifest(f *testing.F) {
	ref := fileRef{Path: "000004.log", Object: "objects/" + fmt.Sprintf("%064x", 7), Size: 12, SHA256: fmt.Sprintf("%064x", 7)}
	cache := fileRef{Path: "cache", Object: "objects/" + fmt.Sprintf("%064x", 8), Size: 40, SHA256: fmt.Sprintf("%064x", 8)}
	good := manifest{Format: manifestFormat, Version: manifestVersion, ID: 3, Seq: 9, Mode: "hybrid", Len: 5,
		DB: []fileRef{ref}, Cache: &cache,
		Samplers: []samplerRef{{Name: "per", RNG: []byte("pcg:0123456789abcdef"), State: fileRef{Path: "sampler/per",
			Object: "objects/" + fmt.Sprintf("%064x", 9), Size: 3, SHA256: fmt.Sprintf("%064x", 9)}}}}
	body, err := json.MarshalIndent(good, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint64(3), body)
	f.Add(uint64(3), body[:len(body)/2])
	f.Add(uint64(2), body)
	f.Add(uint64(1), []byte{})
	f.Add(uint64(1), []byte(`{"format":"herd-persist-snapshot","version":1,"id":1,"mode":"memory","db":[{"path":"../x"}]}`))
	f.Add(uint64(1), []byte("null"))
	f.Fuzz(func(t *testing.T, id uint64, b []byte) {
		m, err := decodeManifest(id, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeManifest(id, again)
		if err != nil {
			t.Fatalf("accepted manifest does not round-trip: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the manifest: %+v vs %+v", m, m2)
		}
	})
}

type stateSampler interface {
	Sampler
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

func fuzzSamplers() []func() stateSampler {
	return []func() stateSampler{
		func() stateSampler { return NewUniform("u") },
		func() stateSampler { return NewPrioritized("p", "priority", 0.6) },
		func() stateSampler { return NewPriorityTime("t", "time", 0.99) },
	}
}

// FuzzSamplerState feeds arbitrary bytes to each shipped sampler's
// UnmarshalBinary: it must fail with ErrCorrupt or yield a sampler that
// samples, updates and round-trips without panicking. Inputs are small,
// and every length in the formats is checked against the bytes left, so
// a decode cannot allocate much more than its input.
func FuzzSamplerState(f *testing.F) {
	for i, mk := range fuzzSamplers() {
		s := mk()
		for j := 0; j < 5; j++ {
			s.BuildIndex(fmt.Sprintf("k%d", j), map[string]float64{"priority": float64(j + 1), "time": float64(j)})
		}
		s.RemoveIndex("k2")
		b, err := s.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
		f.Add(uint8(i), b[:len(b)-1])
	}
	f.Add(uint8(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		mk := fuzzSamplers()[int(which)%3]
		s := mk()
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		r := rand.New(rand.NewPCG(1, 2))
		keys := s.Sample(nil, 8, r)
		if s.Len() == 0 && len(keys) != 0 {
			t.Fatalf("empty sampler drew %v", keys)
		}
		state, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		s2 := mk()
		if err := s2.UnmarshalBinary(state); err != nil {
			t.Fatalf("accepted state does not round-trip: %v", err)
		}
		if again, _ := s2.MarshalBinary(); !bytes.Equal(again, state) {
			t.Fatal("round trip changed the state")
		}
		for _, k := range keys {
			s.RemoveIndex(k)
		}
		s.BuildIndex("new", map[string]float64{"priority": 1, "time": 1})
		s.RemoveIndex("new")
		_ = s.Sample(nil, 8, r)
	})
}

// TestSamplerStateRejectsInconsistent covers states that decode but would
// leave a sampler inconsistent (a key in two slots, an empty key, weight on
// a free slot): each must fail with ErrCorrupt.
func TestSamplerStateRejectsInconsistent(t *testing.T) {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	w := func(b []byte, v float64) []byte { return binary.LittleEndian.AppendUint64(b, math.Float64bits(v)) }
	uniformDup := str(str(binary.AppendUvarint(nil, 2), "a"), "a")
	uniformEmpty := str(binary.AppendUvarint(nil, 1), "")
	treeDup := w(str(w(str(binary.AppendUvarint(nil, 2), "a"), 1), "a"), 2)
	treeFree := w(str(binary.AppendUvarint(nil, 1), ""), 1)
	for name, c := range map[string]struct {
		s stateSampler
		b []byte
	}{
		"uniform repeated key": {NewUniform("u"), uniformDup},
		"uniform empty key":    {NewUniform("u"), uniformEmpty},
		"tree repeated key":    {NewPrioritized("p", "priority", 1), treeDup},
		"tree weighted free":   {NewPrioritized("p", "priority", 1), treeFree},
	} {
		if err := c.s.UnmarshalBinary(c.b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
