package sample

import (
	"fmt"
	"testing"
)

// BenchmarkObsEncodings packs and unpacks 8 rows of MinAtar's 400 binary
// values in each encoding that holds them (bits, as EncodingOf picks, and
// bytes), the work an inference request's observations cost each side.
func BenchmarkObsEncodings(b *testing.B) {
	vals := make([]float32, 8*400)
	for i := range vals {
		vals[i] = float32(i * 7 % 13 % 2)
	}
	for _, enc := range []ObsEncoding{ObsBits, ObsUint8, ObsFloat32} {
		b.Run(fmt.Sprintf("enc%d", enc), func(b *testing.B) {
			buf := make([]byte, 0, ObsBytes(len(vals), enc))
			out := make([]float32, len(vals))
			b.SetBytes(int64(ObsBytes(len(vals), enc)))
			for range b.N {
				buf = AppendObs(buf[:0], vals, enc)
				if err := DecodeObs(out, buf, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestObsRoundTrip(t *testing.T) {
	for _, c := range []struct {
		vals []float32
		enc  ObsEncoding
	}{
		{[]float32{0, 1, 1, 0, 1, 0, 0, 1, 1}, ObsBits},
		{[]float32{0, 255, 3, 1}, ObsUint8},
		{[]float32{0, 0.5}, ObsFloat32},
	} {
		if got := EncodingOf(c.vals); got != c.enc {
			t.Fatalf("%v: encoding %d, want %d", c.vals, got, c.enc)
		}
		b := AppendObs(nil, c.vals, c.enc)
		out := make([]float32, len(c.vals))
		if len(b) != ObsBytes(len(c.vals), c.enc) || DecodeObs(out, b, c.enc) != nil {
			t.Fatalf("%v: %d bytes", c.vals, len(b))
		}
		for i := range out {
			if out[i] != c.vals[i] {
				t.Fatalf("%v decoded as %v", c.vals, out)
			}
		}
	}
	if err := DecodeObs(make([]float32, 9), []byte{0, 2}, ObsBits); err == nil {
		t.Fatal("a bit past the last value decoded")
	}
	if err := DecodeObs(make([]float32, 2), []byte{0}, ObsUint8); err == nil {
		t.Fatal("a short array decoded")
	}
}
