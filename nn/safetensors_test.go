package nn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"herd/internal/rng"
)

// TestSafetensorsGolden pins the byte format: 8-byte little-endian header
// length, JSON header padded with spaces to 8 bytes, little-endian F32 data.
func TestSafetensorsGolden(t *testing.T) {
	var buf bytes.Buffer
	err := WriteSafetensors(&buf, map[string]Tensor{"b": {Shape: []int{2}, Data: []float32{1, -2}}},
		map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	hdr := `{"__metadata__":{"k":"v"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	want := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	want = append(want, hdr...)
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(1))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(-2))
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("bytes:\n%q\nwant\n%q", buf.Bytes(), want)
	}
}

// TestSafetensorsRoundTrip saves an MLP, loads it into a differently
// seeded one, and checks equal weights and outputs; it also checks the
// PyTorch layout by evaluating the first layer from the raw tensors.
func TestSafetensorsRoundTrip(t *testing.T) {
	r := rng.New(1, "nn/st", 0)
	a, _ := NewMLP(MLPConfig{In: 3, Hidden: []int{5}, Out: 2}, r)
	b, _ := NewMLP(MLPConfig{In: 3, Hidden: []int{5}, Out: 2}, rng.New(2, "nn/st", 0))
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := SaveFile(path, a.Params(), map[string]string{"step": "7"}); err != nil {
		t.Fatal(err)
	}
	md, err := LoadFile(path, b.Params())
	if err != nil {
		t.Fatal(err)
	}
	if md["step"] != "7" {
		t.Fatalf("metadata %v", md)
	}
	x := []float32{0.3, -1, 2}
	ya := append([]float32(nil), a.Forward(x, 1)...)
	yb := b.Forward(x, 1)
	for i := range ya {
		if ya[i] != yb[i] {
			t.Fatalf("output %d: %v vs %v after load", i, ya[i], yb[i])
		}
	}
	f, _ := os.Open(path)
	ck, err := ReadSafetensors(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	w, bias := ck.Tensors["0.weight"], ck.Tensors["0.bias"]
	if len(w.Shape) != 2 || w.Shape[0] != 5 || w.Shape[1] != 3 {
		t.Fatalf("0.weight shape %v, want [5 3] (PyTorch [out, in])", w.Shape)
	}
	// relu(W x + b) from the checkpoint equals layer 0's output
	a.Forward(x, 1)
	for o := 0; o < 5; o++ {
		s := float64(bias.Data[o])
		for i := 0; i < 3; i++ {
			s += float64(w.Data[o*3+i]) * float64(x[i])
		}
		if !closeTo(a.layers[0].y[o], math.Max(s, 0), 1e-5) {
			t.Fatalf("hidden %d: %v from net, %v from checkpoint", o, a.layers[0].y[o], math.Max(s, 0))
		}
	}
}

// TestSafetensorsCorrupt: every truncation and a set of damaged headers
// give ErrCorrupt (never a panic), and the target parameters are untouched.
func TestSafetensorsCorrupt(t *testing.T) {
	r := rng.New(1, "nn/st", 1)
	m, _ := NewMLP(MLPConfig{In: 2, Hidden: []int{3}, Out: 1}, r)
	var buf bytes.Buffer
	if err := Save(&buf, m.Params(), nil); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	dst, _ := NewMLP(MLPConfig{In: 2, Hidden: []int{3}, Out: 1}, rng.New(9, "nn/st", 1))
	before := append([]float32(nil), dst.Params()[0].Value...)
	for n := 0; n < len(good); n++ {
		if _, err := Load(bytes.NewReader(good[:n]), dst.Params()); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
	mk := func(hdr string, data int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		return append(append(b, hdr...), make([]byte, data)...)
	}
	for name, file := range map[string][]byte{
		"not json":       mk(`{"a":`, 0),
		"huge header":    binary.LittleEndian.AppendUint64(nil, 1<<40),
		"f16":            mk(`{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, 2),
		"past end":       mk(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4),
		"size mismatch":  mk(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8),
		"negative shape": mk(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0),
		"overlap":        mk(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8),
		"trailing bytes": mk(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 8),
		"bad metadata":   mk(`{"__metadata__":{"k":1}}`, 0),
	} {
		if _, err := ReadSafetensors(bytes.NewReader(file)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
	for i, v := range dst.Params()[0].Value {
		if v != before[i] {
			t.Fatal("a failed load modified the parameters")
		}
	}
	// Wrong architecture: missing tensors and shape mismatches.
	other, _ := NewMLP(MLPConfig{In: 2, Hidden: []int{4}, Out: 1, OutAct: Tanh}, r)
	if _, err := Load(bytes.NewReader(good), other.Params()); !errors.Is(err, ErrShape) {
		t.Fatalf("shape mismatch: %v", err)
	}
	deeper, _ := NewMLP(MLPConfig{In: 2, Hidden: []int{3, 3}, Out: 1}, r)
	if _, err := Load(bytes.NewReader(good), deeper.Params()); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing tensor: %v", err)
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "nope"), m.Params()); err == nil {
		t.Fatal("loading a missing file succeeded")
	}
}

// FuzzReadSafetensors: arbitrary bytes never panic.
func FuzzReadSafetensors(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteSafetensors(&buf, map[string]Tensor{"a": {Shape: []int{2, 1}, Data: []float32{1, 2}}}, nil)
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := ReadSafetensors(bytes.NewReader(b))
		if err == nil && ck == nil {
			t.Fatal("nil checkpoint without error")
		}
	})
}
