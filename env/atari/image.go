package atari

import (
	"fmt"
	"math"
)

// toByte reads an observation value as the uint8 it stands for: ALE's
// frames are uint8 arrays, which herd carries as float32 integers 0…255.
// Other values are rounded (half to even) and clamped, as OpenCV's
// saturate_cast does.
func toByte(v float32) uint8 {
	if !(v > 0) { // also NaN
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(math.RoundToEven(float64(v)))
}

// saturate is OpenCV's saturate_cast<uchar>(float): round half to even,
// then clamp.
func saturate(v float32) float32 {
	r := math.RoundToEven(float64(v))
	return float32(min(max(r, 0), 255))
}

// Gray converts one RGB pixel to gray as cv2.cvtColor(COLOR_RGB2GRAY) does
// on uint8 images: Y = 0.299 R + 0.587 G + 0.114 B in 14-bit fixed point
// (OpenCV's R2Y, G2Y, B2Y), rounded half up.
func Gray(r, g, b uint8) uint8 {
	const (
		r2y   = 4899
		g2y   = 9617
		b2y   = 1868
		shift = 14
	)
	return uint8((int(r)*r2y + int(g)*g2y + int(b)*b2y + 1<<(shift-1)) >> shift)
}

// areaTap adds src[si]·alpha to dst[di] (OpenCV's DecimateAlpha).
type areaTap struct {
	di, si int
	alpha  float32
}

// areaTable is OpenCV's computeResizeAreaTab: for each output index the
// source cells its footprint [d·scale, (d+1)·scale) covers, weighted by the
// covered fraction over the footprint's width, in float32 as OpenCV keeps
// them.
func areaTable(ssize, dsize int, scale float64) []areaTap {
	var tab []areaTap
	for dx := range dsize {
		fsx1 := float64(dx) * scale
		fsx2 := fsx1 + scale
		cell := min(scale, float64(ssize)-fsx1)
		sx1, sx2 := int(math.Ceil(fsx1)), int(math.Floor(fsx2))
		sx2 = min(sx2, ssize-1)
		sx1 = min(sx1, sx2)
		if float64(sx1)-fsx1 > 1e-3 {
			tab = append(tab, areaTap{dx, sx1 - 1, float32((float64(sx1) - fsx1) / cell)})
		}
		for sx := sx1; sx < sx2; sx++ {
			tab = append(tab, areaTap{dx, sx, float32(1.0 / cell)})
		}
		if fsx2-float64(sx2) > 1e-3 {
			tab = append(tab, areaTap{dx, sx2, float32(min(fsx2-float64(sx2), 1, cell) / cell)})
		}
	}
	return tab
}

// AreaResizer shrinks H×W×C uint8 images (row-major, channels last) to
// OH×OW×C as cv2.resize(img, (OW, OH), interpolation=cv2.INTER_AREA) does,
// bit for bit: each output pixel is the mean of the source pixels its
// footprint covers, weighted by the covered area. Integer ratios take
// OpenCV's fast path (integer sums; a 2×2 block rounds half up), others
// its float32 weighted sums rounded half to even.
type AreaResizer struct {
	h, w, c, oh, ow int
	fast            bool
	sx, sy          int // integer ratios on the fast path
	xtab, ytab      []areaTap
	buf, sum        []float32
}

// NewAreaResizer prepares the tables for h×w×c → oh×ow×c. Only shrinking
// is an area resize (OpenCV enlarges with bilinear interpolation under the
// same flag), so oh ≤ h and ow ≤ w.
func NewAreaResizer(h, w, c, oh, ow int) (*AreaResizer, error) {
	if h < 1 || w < 1 || c < 1 || oh < 1 || ow < 1 {
		return nil, fmt.Errorf("area resize %d×%d×%d to %d×%d: sizes must be positive", h, w, c, oh, ow)
	}
	if oh > h || ow > w {
		return nil, fmt.Errorf("area resize %d×%d to %d×%d: only shrinking is an area resize", h, w, oh, ow)
	}
	// OpenCV's scales, computed in the same order so the doubles agree.
	scaleX := 1.0 / (float64(ow) / float64(w))
	scaleY := 1.0 / (float64(oh) / float64(h))
	ix, iy := int(math.Round(scaleX)), int(math.Round(scaleY))
	r := &AreaResizer{h: h, w: w, c: c, oh: oh, ow: ow}
	if math.Abs(scaleX-float64(ix)) < 0x1p-52 && math.Abs(scaleY-float64(iy)) < 0x1p-52 {
		r.fast, r.sx, r.sy = true, ix, iy
		return r, nil
	}
	r.xtab = areaTable(w, ow, scaleX)
	r.ytab = areaTable(h, oh, scaleY)
	r.buf = make([]float32, ow*c)
	r.sum = make([]float32, ow*c)
	return r, nil
}

// Resize writes the resized src (h·w·c values, read as uint8) into dst
// (oh·ow·c values, integers 0…255).
func (r *AreaResizer) Resize(dst, src []float32) {
	if r.fast {
		r.resizeFast(dst, src)
		return
	}
	c, wc, owc := r.c, r.w*r.c, r.ow*r.c
	buf, sum := r.buf, r.sum
	prev := r.ytab[0].di
	clear(sum)
	for _, yt := range r.ytab {
		row := src[yt.si*wc : (yt.si+1)*wc]
		clear(buf)
		for _, xt := range r.xtab {
			d, s := xt.di*c, xt.si*c
			for k := range c {
				// The conversion keeps the product rounded to float32
				// on its own, as OpenCV computes it (no fused multiply-add).
				buf[d+k] += float32(float32(toByte(row[s+k])) * xt.alpha)
			}
		}
		if yt.di != prev {
			out := dst[prev*owc : (prev+1)*owc]
			for i := range sum {
				out[i] = saturate(sum[i])
				sum[i] = float32(yt.alpha * buf[i])
			}
			prev = yt.di
		} else {
			for i := range sum {
				sum[i] += float32(yt.alpha * buf[i])
			}
		}
	}
	out := dst[prev*owc : (prev+1)*owc]
	for i := range sum {
		out[i] = saturate(sum[i])
	}
}

// resizeFast is OpenCV's resizeAreaFast for integer ratios sx × sy.
func (r *AreaResizer) resizeFast(dst, src []float32) {
	c, wc := r.c, r.w*r.c
	area := r.sx * r.sy
	scale := float32(1) / float32(area)
	for oy := range r.oh {
		for ox := range r.ow {
			for k := range c {
				s := 0
				for y := oy * r.sy; y < (oy+1)*r.sy; y++ {
					for x := ox * r.sx; x < (ox+1)*r.sx; x++ {
						s += int(toByte(src[y*wc+x*c+k]))
					}
				}
				var v float32
				if area == 4 && r.sx == 2 && (c == 1 || c == 3 || c == 4) {
					v = float32((s + 2) >> 2) // OpenCV's vector path for 2×2
				} else {
					v = saturate(float32(s) * scale)
				}
				dst[(oy*r.ow+ox)*c+k] = v
			}
		}
	}
}
