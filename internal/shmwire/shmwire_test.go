package shmwire

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	herdv1 "herd/proto/herd/v1"
)

// TestLayout pins the offsets python/herd_env/shm.py computes too
// (python/tests/test_shm_u8.py checks them against this table).
func TestLayout(t *testing.T) {
	l := NewLayout(3, 5, 2, false)
	want := Layout{N: 3, ObsDim: 5, ActDim: 2, ObsBytes: 4, Act: 64, Obs: 64 + 24, Final: 88 + 64, Rew: 152 + 64, Lives: 216 + 24, Term: 240 + 16, Trunc: 256 + 8, Size: 4096}
	if l != want {
		t.Fatalf("layout %+v, want %+v", l, want)
	}
	mem := make([]byte, l.Size)
	l.WriteHeader(mem)
	if err := l.CheckHeader(mem); err != nil {
		t.Fatal(err)
	}
	if err := NewLayout(3, 5, 1, false).CheckHeader(mem); !errors.Is(err, ErrFrame) {
		t.Fatalf("other layout: %v", err)
	}
	if err := NewLayout(3, 5, 2, true).CheckHeader(mem); !errors.Is(err, ErrFrame) {
		t.Fatalf("uint8 layout against a float one: %v", err)
	}
	v := l.Views(mem)
	v.Rew[2] = 1.5
	v.Trunc[2] = 1
	v.Lives[1] = 7
	if len(v.Act) != 6 || len(v.Obs) != 15 || len(v.Final) != 15 || len(v.Term) != 3 || v.ObsU8 != nil || mem[l.Trunc+2] != 1 || mem[l.Lives+4] != 7 {
		t.Fatalf("views %d %d %d %d", len(v.Act), len(v.Obs), len(v.Final), len(v.Term))
	}

	u := NewLayout(3, 5, 2, true)
	want = Layout{N: 3, ObsDim: 5, ActDim: 2, ObsBytes: 1, Act: 64, Obs: 88, Final: 88 + 16, Rew: 104 + 16, Lives: 120 + 24, Term: 144 + 16, Trunc: 160 + 8, Size: 4096}
	if u != want {
		t.Fatalf("uint8 layout %+v, want %+v", u, want)
	}
	u.WriteHeader(mem)
	uv := u.Views(mem)
	if len(uv.ObsU8) != 15 || len(uv.FinalU8) != 15 || uv.Obs != nil || uv.Final != nil {
		t.Fatalf("uint8 views %d %d %d", len(uv.ObsU8), len(uv.FinalU8), len(uv.Obs))
	}
}

// TestOldLayout: a peer of the previous layout version learns why its
// segment is refused.
func TestOldLayout(t *testing.T) {
	l := NewLayout(1, 4, 1, false)
	mem := make([]byte, l.Size)
	l.WriteHeader(mem)
	copy(mem, "HERDSHM1")
	err := l.CheckHeader(mem)
	if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), `"HERDSHM1"`) || !strings.Contains(err.Error(), "same herd version") {
		t.Fatalf("old layout: %v", err)
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
