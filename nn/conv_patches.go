package nn

import "herd/nn/internal/kernel"

// The patch layout keeps X̂ transposed: one row of C·k·k taps per
// (sample, output position), rows in (sample, position) order. Within a
// row, the k taps of one kernel row (c, di) are consecutive input values
// (x[c][i·s+di][j·s … j·s+k−1]). The forward and dWᵀ products read those
// rows straight from the image (kernel.ConvGemmGather, through the
// offset tables of Conv2d.offsets), and dX̂ᵀ is made a block of rows at a
// time (patchBlock) and added back onto the image (row2im) while it is in
// cache.

// patchBlock is how many rows of dX̂ᵀ a Conv2d with patches makes at a
// time: about 128 KiB of them, a multiple of 6 (kernel.ConvGemm's tile).
func patchBlock(ckk int) int { return max(6, 32768/ckk/6*6) }

// row2im takes rows r0 … r0+len(rows)/ckk−1 of dX̂ᵀ and adds each back
// onto the input values its taps read (dx, cleared by the caller),
// dropping any padding, last row first. Called on the
// blocks of rows last first, every input value receives its terms in
// increasing tap order t = (c, di, dj), as col2im adds them: within one
// image a value meets tap (di, dj) at position (i, j) = ((y−di)/s,
// (x−dj)/s), so walking the positions backwards visits its taps forwards.
func row2im(dx, rows []float32, r0 int, cfg Conv2dConfig) {
	C, h, w, k, s, pad := cfg.InChannels, cfg.InH, cfg.InW, cfg.Kernel, cfg.stride(), cfg.Padding
	ow := cfg.OutW()
	p := cfg.OutH() * ow
	in, ckk := C*h*w, C*k*k
	for r := len(rows)/ckk - 1; r >= 0; r-- {
		n, q := (r0+r)/p, (r0+r)%p
		i, j := q/ow, q%ow
		img := dx[n*in:][:in]
		row := rows[r*ckk:][:ckk]
		x0 := j*s - pad
		lo, hi := max(0, -x0), min(k, w-x0)
		if lo >= hi {
			continue
		}
		if y0 := i*s - pad; lo == 0 && hi == k && y0 >= 0 && y0+k <= h {
			kernel.AddRuns(img[y0*w+x0:], row, C, k, w, h*w)
			continue
		}
		for c := range C {
			for di := range k {
				y := i*s - pad + di
				if y < 0 || y >= h {
					continue
				}
				src := row[(c*k+di)*k+lo:][:hi-lo]
				dst := img[(c*h+y)*w+x0+lo:][:hi-lo]
				for t, v := range src {
					dst[t] += v
				}
			}
		}
	}
}
