package trainstate

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample(step int64) State {
	return State{
		Header:   Header{Algo: "dqn", Env: "CartPole-v1", ConfigHash: "abc", Step: step},
		Sections: map[string][]byte{"weights": {1, 2, 3}, "replay": bytes.Repeat([]byte{7}, 1000), "empty": {}},
	}
}

func encode(t *testing.T, s State) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTripAndRandomStream(t *testing.T) {
	s := sample(42)
	src := rand.NewPCG(1, 2)
	r := rand.New(src)
	for range 17 {
		r.Uint64()
	}
	if err := s.Put("rng/learner", src); err != nil {
		t.Fatal(err)
	}
	want := make([]uint64, 5)
	for i := range want {
		want[i] = r.Uint64()
	}
	b := encode(t, s)
	if !bytes.Equal(b, encode(t, s)) {
		t.Fatal("equal states encode to different bytes")
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header != s.Header || len(got.Sections) != len(s.Sections) {
		t.Fatalf("header/sections: %+v", got.Header)
	}
	for n, v := range s.Sections {
		if !bytes.Equal(got.Sections[n], v) {
			t.Fatalf("section %s differs", n)
		}
	}
	restored := rand.NewPCG(0, 0)
	if err := got.Get("rng/learner", restored); err != nil {
		t.Fatal(err)
	}
	r2 := rand.New(restored)
	for i, w := range want {
		if g := r2.Uint64(); g != w {
			t.Fatalf("draw %d after restore: %d, want %d", i, g, w)
		}
	}
	if err := got.Get("rng/absent", restored); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "rng/absent") {
		t.Fatalf("missing section: %v", err)
	}
}

func TestDecodeRefusesDamage(t *testing.T) {
	b := encode(t, sample(1))
	for _, n := range []int{0, 5, len(b) / 2, len(b) - 1} {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d: %v", n, err)
		}
	}
	for _, i := range []int{20, len(b) / 2, len(b) - 1} {
		c := bytes.Clone(b)
		c[i] ^= 1
		if _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
			t.Errorf("bit flip at %d: %v", i, err)
		}
	}
	c := bytes.Clone(b)
	c[8] = 9
	if _, err := Decode(c); !errors.Is(err, ErrVersion) {
		t.Errorf("version 9: %v", err)
	}
}

func TestCheckNamesDifferences(t *testing.T) {
	h := sample(5).Header
	if err := Check(h, Header{Algo: "dqn", Env: "CartPole-v1", ConfigHash: "abc", Step: 99}); err != nil {
		t.Fatalf("same run, other step: %v", err)
	}
	err := Check(h, Header{Algo: "ppo", Env: "Acrobot-v1", ConfigHash: "def"})
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("%v", err)
	}
	for _, w := range []string{"algorithm dqn, not ppo", "env CartPole-v1, not Acrobot-v1", "config hash abc, not def"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
}

func TestDirKeepsLastKAndFallsBack(t *testing.T) {
	d := Dir{Path: t.TempDir(), Keep: 2}
	if _, _, _, err := d.LoadNewest(); !errors.Is(err, ErrNone) {
		t.Fatalf("empty dir: %v", err)
	}
	var paths []string
	for _, step := range []int64{100, 2000, 30000} {
		p, err := d.Save(sample(step))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	names, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || filepath.Join(d.Path, names[1]) != paths[2] {
		t.Fatalf("kept %v", names)
	}
	ents, _ := os.ReadDir(d.Path)
	if len(ents) != 2 {
		t.Fatalf("staging files left: %v", ents)
	}
	s, p, skipped, err := d.LoadNewest()
	if err != nil || p != paths[2] || s.Header.Step != 30000 || len(skipped) != 0 {
		t.Fatalf("newest: %v %s %v", err, p, skipped)
	}
	// Truncate the newest: the previous one loads, and the skip is named.
	b, _ := os.ReadFile(paths[2])
	if err := os.WriteFile(paths[2], b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	s, p, skipped, err = d.LoadNewest()
	if err != nil || p != paths[1] || s.Header.Step != 2000 {
		t.Fatalf("fallback: %v %s", err, p)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], paths[2]) || !strings.Contains(skipped[0], "corrupt") {
		t.Fatalf("skipped: %v", skipped)
	}
	if err := os.WriteFile(paths[1], []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, skipped, err = d.LoadNewest(); !errors.Is(err, ErrNone) || len(skipped) != 2 {
		t.Fatalf("all damaged: %v %v", err, skipped)
	}
}

func BenchmarkEncode8MB(b *testing.B) {
	s := sample(1)
	s.Sections["replay"] = make([]byte, 8<<20)
	b.SetBytes(8 << 20)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := Encode(&buf, s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSave8MB(b *testing.B) {
	s := sample(1)
	s.Sections["replay"] = make([]byte, 8<<20)
	d := Dir{Path: b.TempDir(), Keep: 2}
	b.SetBytes(8 << 20)
	for b.Loop() {
		s.Header.Step++
		if _, err := d.Save(s); err != nil {
			b.Fatal(err)
		}
	}
}
