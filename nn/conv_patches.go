package nn

import "herd/nn/internal/kernel"

// The patch layout keeps X̂ transposed: one row of C·k·k taps per
// (sample, output position), rows in (sample, position) order. Within a
// row, the k taps of one kernel row (c, di) are consecutive input values
// (x[c][i·s+di][j·s … j·s+k−1]), so gathering a row copies C·k runs of k
// values instead of looking up C·k·k taps one by one, and the products
// read every operand with unit stride. The rows are made and used a block
// at a time (patchBlock), so they stay in cache: the forward pass and
// dWᵀ gather them from the input, dX̂ᵀ is scattered back as it is made.

// patchBlock is how many rows of X̂ᵀ a Conv2d with patches makes at a
// time: about 128 KiB of them, a multiple of 6 (kernel.ConvGemm's tile).
func patchBlock(ckk int) int { return max(6, 32768/ckk/6*6) }

// im2row writes rows r0 … r0+len(rows)/ckk−1 of X̂ᵀ into rows:
// rows[(r−r0)·ckk + t] = x[n, tap t of position q] for r = n·p+q, 0 on
// the padding.
func im2row(rows, x []float32, r0 int, cfg Conv2dConfig) {
	C, h, w, k, s, pad := cfg.InChannels, cfg.InH, cfg.InW, cfg.Kernel, cfg.stride(), cfg.Padding
	ow := cfg.OutW()
	p := cfg.OutH() * ow
	in, ckk := C*h*w, C*k*k
	for r := range len(rows) / ckk {
		n, q := (r0+r)/p, (r0+r)%p
		i, j := q/ow, q%ow
		img := x[n*in:][:in]
		row := rows[r*ckk:][:ckk]
		x0 := j*s - pad
		lo, hi := max(0, -x0), min(k, w-x0) // the taps of a kernel row inside the image
		if lo >= hi {
			clear(row)
			continue
		}
		if lo == 0 && hi == k && k >= 8 && i*s-pad >= 0 && i*s-pad+k <= h {
			// Every kernel row inside the image: k rows of k values per
			// channel, w apart.
			for c := range C {
				kernel.CopyRows(row[c*k*k:][:k*k], img[(c*h+i*s-pad)*w+x0:], k, k, w)
			}
			continue
		}
		for c := range C {
			for di := range k {
				dst := row[(c*k+di)*k:][:k]
				y := i*s - pad + di
				if y < 0 || y >= h {
					clear(dst)
					continue
				}
				src := img[(c*h+y)*w+x0+lo:]
				switch {
				case lo == 0 && hi == k && k == 4:
					d, v := (*[4]float32)(dst), (*[4]float32)(src)
					d[0], d[1], d[2], d[3] = v[0], v[1], v[2], v[3]
				case lo == 0 && hi == k && k == 3:
					d, v := (*[3]float32)(dst), (*[3]float32)(src)
					d[0], d[1], d[2] = v[0], v[1], v[2]
				default:
					clear(dst[:lo])
					for t, v := range src[:hi-lo] {
						dst[lo+t] = v
					}
					clear(dst[hi:])
				}
			}
		}
	}
}

// row2im is im2row's adjoint for rows r0 … r0+len(rows)/ckk−1 of dX̂ᵀ: it
// adds each back onto the input values it was read from (dx, cleared by
// the caller), dropping the padding, last row first. Called on the
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
