package atari

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// pixels is testdata/gen.py's image: pixel(i) = ((i+1)·2654435761 >> 13) mod 256.
func pixels(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(uint8((uint64(i+1) * 2654435761) >> 13))
	}
	return out
}

type cv2Tables struct {
	OpenCV string `json:"opencv"`
	Resize []struct {
		H, W, C, OH, OW int
		Dst             string
	} `json:"resize"`
	Gray []struct{ Src, Dst string } `json:"gray"`
}

func loadCV2(t *testing.T) cv2Tables {
	t.Helper()
	b, err := os.ReadFile("testdata/cv2.json")
	if err != nil {
		t.Fatal(err)
	}
	var tab cv2Tables
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	return tab
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAreaResizeOpenCV pins AreaResizer to cv2.resize(INTER_AREA) on the
// Atari frame size and on integer and odd ratios, every output value.
func TestAreaResizeOpenCV(t *testing.T) {
	tab := loadCV2(t)
	for _, c := range tab.Resize {
		r, err := NewAreaResizer(c.H, c.W, c.C, c.OH, c.OW)
		if err != nil {
			t.Fatal(err)
		}
		want := unhex(t, c.Dst)
		got := make([]float32, c.OH*c.OW*c.C)
		r.Resize(got, pixels(c.H*c.W*c.C))
		bad := 0
		for i, w := range want {
			if got[i] != float32(w) {
				if bad < 3 {
					t.Errorf("%d×%d×%d→%d×%d: value %d = %v, OpenCV %s: %d", c.H, c.W, c.C, c.OH, c.OW, i, got[i], tab.OpenCV, w)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%d×%d×%d→%d×%d: %d of %d values differ from OpenCV", c.H, c.W, c.C, c.OH, c.OW, bad, len(want))
		}
	}
}

// TestAreaResizeBlockMeans checks integer ratios by another route: the
// plain mean of each block, rounded half to even (3×3) or half up (2×2,
// OpenCV's vector path), on an image whose 2×2 sums hit every remainder.
func TestAreaResizeBlockMeans(t *testing.T) {
	for _, k := range []int{2, 3} {
		const n = 12
		src := pixels(n * n)
		r, err := NewAreaResizer(n, n, 1, n/k, n/k)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, (n/k)*(n/k))
		r.Resize(got, src)
		for oy := range n / k {
			for ox := range n / k {
				s := 0
				for y := range k {
					for x := range k {
						s += int(src[(oy*k+y)*n+ox*k+x])
					}
				}
				q, rem := s/(k*k), s%(k*k)
				want := q
				if 2*rem > k*k || (2*rem == k*k && (k == 2 || q%2 == 1)) {
					want++
				}
				if got[oy*(n/k)+ox] != float32(want) {
					t.Errorf("%d×%d block (%d,%d): sum %d, got %v, want %d", k, k, oy, ox, s, got[oy*(n/k)+ox], want)
				}
			}
		}
	}
}

// TestAreaResizeByHand is a non-integer ratio worked by hand: a 1×5 row to
// 1×2, footprints 2.5 wide: out0 = (a + b + c/2)/2.5, out1 = (c/2 + d + e)/2.5.
func TestAreaResizeByHand(t *testing.T) {
	r, err := NewAreaResizer(1, 5, 1, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	r.Resize(got, []float32{10, 20, 31, 40, 50})
	// (10+20+15.5)/2.5 = 18.2 → 18; (15.5+40+50)/2.5 = 42.2 → 42.
	if got[0] != 18 || got[1] != 42 {
		t.Errorf("got %v, want [18 42]", got)
	}
	r.Resize(got, []float32{0, 0, 5, 0, 0}) // 2.5/2.5 = 1 each side
	if got[0] != 1 || got[1] != 1 {
		t.Errorf("got %v, want [1 1]", got)
	}
}

func TestAreaResizeRefusesGrowing(t *testing.T) {
	if _, err := NewAreaResizer(4, 4, 1, 8, 4); err == nil {
		t.Error("4×4 → 8×4 accepted")
	}
	if _, err := NewAreaResizer(4, 4, 0, 2, 2); err == nil {
		t.Error("0 channels accepted")
	}
}

// TestGrayOpenCV pins Gray to cv2.cvtColor(COLOR_RGB2GRAY).
func TestGrayOpenCV(t *testing.T) {
	for _, c := range loadCV2(t).Gray {
		src, want := unhex(t, c.Src), unhex(t, c.Dst)
		for i, w := range want {
			if g := Gray(src[3*i], src[3*i+1], src[3*i+2]); g != w {
				t.Errorf("RGB %v: gray %d, OpenCV %d", src[3*i:3*i+3], g, w)
			}
		}
	}
}
