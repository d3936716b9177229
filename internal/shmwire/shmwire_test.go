package shmwire

import (
	"bytes"
	"errors"
	"testing"

	herdv1 "herd/proto/herd/v1"
)

// TestLayout pins the offsets python/herd_env/shm.py computes too.
func TestLayout(t *testing.T) {
	l := NewLayout(3, 5, 2)
	want := Layout{N: 3, ObsDim: 5, ActDim: 2, Act: 64, Obs: 64 + 24, Final: 88 + 64, Rew: 152 + 64, Term: 216 + 24, Trunc: 240 + 8, Size: 4096}
	if l != want {
		t.Fatalf("layout %+v, want %+v", l, want)
	}
	mem := make([]byte, l.Size)
	l.WriteHeader(mem)
	if err := l.CheckHeader(mem); err != nil {
		t.Fatal(err)
	}
	if err := NewLayout(3, 5, 1).CheckHeader(mem); !errors.Is(err, ErrFrame) {
		t.Fatalf("other layout: %v", err)
	}
	v := l.Views(mem)
	v.Rew[2] = 1.5
	v.Trunc[2] = 1
	if len(v.Act) != 6 || len(v.Obs) != 15 || len(v.Final) != 15 || len(v.Term) != 3 || mem[l.Trunc+2] != 1 {
		t.Fatalf("views %d %d %d %d", len(v.Act), len(v.Obs), len(v.Final), len(v.Term))
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	in := &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{Seeds: []int64{1, 2}}}}
	if err := WriteMsg(&buf, in); err != nil {
		t.Fatal(err)
	}
	if b, _ := buf.ReadByte(); b != Msg {
		t.Fatalf("tag %q", b)
	}
	out := new(herdv1.EnvRequest)
	if err := ReadFrame(&buf, out); err != nil || len(out.GetReset_().GetSeeds()) != 2 {
		t.Fatalf("%v %v", out, err)
	}
	if err := ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), out); !errors.Is(err, ErrFrame) {
		t.Fatalf("huge frame: %v", err)
	}
	if err := ReadFrame(bytes.NewReader([]byte{2, 0, 0, 0, 0xff, 0xff}), out); !errors.Is(err, ErrFrame) {
		t.Fatalf("junk frame: %v", err)
	}
}
