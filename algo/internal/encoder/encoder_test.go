package encoder

import (
	"strings"
	"testing"

	"herd/env"
	"herd/internal/rng"
)

// TestConvTransposesHWC pins the layout change where observations enter
// the network: the env's [H, W, C] value (h, w, c) is channel c's pixel
// (h, w) of nn.Conv2d's NCHW input.
func TestConvTransposesHWC(t *testing.T) {
	const H, W, C, B = 10, 10, 4, 2
	obs := env.Box{Low: make([]float32, H*W*C), High: make([]float32, H*W*C), Dims: []int{H, W, C}}
	cq, err := NewConv(MinAtar, obs, []int{16}, 3, rng.New(1, "test", 0))
	if err != nil {
		t.Fatal(err)
	}
	r := rng.New(2, "test", 0)
	hwc := make([]float32, B*H*W*C)
	for i := range hwc {
		hwc[i] = float32(r.IntN(2))
	}
	chw := make([]float32, len(hwc))
	for b := range B {
		for h := range H {
			for w := range W {
				for c := range C {
					chw[b*H*W*C+(c*H+h)*W+w] = hwc[b*H*W*C+(h*W+w)*C+c]
				}
			}
		}
	}
	got := append([]float32(nil), cq.Forward(hwc, B)...)
	want := cq.net.Forward(chw, B)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("out[%d] = %v, want %v (NCHW of the same frames)", i, got[i], want[i])
		}
	}
}

// TestCheck: unknown names and vector observations under a
// convolutional encoder are refused with the reason.
func TestCheck(t *testing.T) {
	for _, n := range []string{MLP, MinAtar, Nature, Impala} {
		if err := Check(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if err := Check("resnet"); err == nil || !strings.Contains(err.Error(), "resnet") {
		t.Errorf("resnet: %v", err)
	}
	if err := CheckEnv(env.Maker{}, MinAtar, "CartPole-v1"); err == nil || !strings.Contains(err.Error(), "not an image") {
		t.Errorf("minatar on CartPole: %v", err)
	}
	if err := CheckEnv(env.Maker{}, MinAtar, "MinAtar/Breakout-v1"); err != nil {
		t.Errorf("minatar on MinAtar: %v", err)
	}
	if err := CheckEnv(env.Maker{}, MLP, "MinAtar/Breakout-v1"); err != nil {
		t.Errorf("mlp on MinAtar: %v", err)
	}
}
