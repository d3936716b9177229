package algo

import (
	"math"
	"testing"

	"herd/env"
	"herd/sample"
)

// TestReplayObsEncoding: the replay stores a Box's observations a bit a
// value when every bound lies in [0, 1], a byte a value when in [0, 255],
// float32 otherwise (any bound outside, NaN or infinite, or a space that
// is not a Box); and n-step rows carry one float32 discount column.
func TestReplayObsEncoding(t *testing.T) {
	box := func(low, high float32) env.Box {
		return env.Box{Low: []float32{0, low, 0}, High: []float32{1, high, 1}}
	}
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		space env.Space
		want  sample.ObsEncoding
	}{
		{box(0, 1), sample.ObsBits},
		{box(0, 0), sample.ObsBits},
		{box(0, 255), sample.ObsUint8},
		{box(0, 2), sample.ObsUint8},
		{box(0, 256), sample.ObsFloat32},
		{box(-1, 1), sample.ObsFloat32},
		{box(0, inf), sample.ObsFloat32},
		{box(float32(math.NaN()), 1), sample.ObsFloat32},
		{env.Box{}, sample.ObsFloat32},
		{env.Discrete{N: 2}, sample.ObsFloat32},
	} {
		if got := ReplayObsEncoding(tc.space); got != tc.want {
			t.Errorf("%v: encoding %d, want %d", tc.space, got, tc.want)
		}
	}
	one, three := ReplayStorage(400, 1, 1, sample.ObsBits), ReplayStorage(400, 1, 3, sample.ObsBits)
	if one.ObsSize != 400 || one.ObsFloatTail != 0 || three.ObsSize != 401 || three.ObsFloatTail != 1 {
		t.Fatalf("rows %+v (n=1), %+v (n=3)", one, three)
	}
}
