package kernel

// CopyRows copies rows rows of w values, row t from src[t·lds:], into dst
// laid end to end (dst[t·w:]): the gather of a stride-1 convolution's
// column matrix, one output row's taps at a time.
func CopyRows(dst, src []float32, rows, w, lds int) { copyRowsOn(active, dst, src, rows, w, lds) }

func copyRowsOn(l Level, dst, src []float32, rows, w, lds int) {
	if rows <= 0 || w <= 0 {
		return
	}
	// The assembly trusts its pointers: check the extents once.
	_ = dst[rows*w-1]
	_ = src[(rows-1)*lds+w-1]
	if l >= AVX2FMA && w >= 8 {
		copyRowsAsm(dst, src, rows, w, lds)
		return
	}
	for t := range rows {
		copy(dst[t*w:(t+1)*w], src[t*lds:t*lds+w])
	}
}
