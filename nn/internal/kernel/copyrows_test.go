package kernel

import "testing"

// TestCopyRows: every path copies exactly the rows asked for, at widths
// below, at and above 8 and not multiples of it, and writes nothing else.
func TestCopyRows(t *testing.T) {
	for _, sz := range [][3]int{{1, 1, 1}, {3, 5, 7}, {8, 8, 10}, {4, 8, 8}, {5, 9, 12}, {2, 17, 20}, {7, 24, 24}, {3, 13, 100}} {
		rows, w, lds := sz[0], sz[1], sz[2]
		src := make([]float32, (rows-1)*lds+w)
		for i := range src {
			src[i] = float32(i + 1)
		}
		for _, path := range Levels() {
			dst := make([]float32, rows*w+3)
			dst[rows*w], dst[rows*w+1], dst[rows*w+2] = -1, -2, -3
			copyRowsOn(path, dst, src, rows, w, lds)
			for r := range rows {
				for j := range w {
					if dst[r*w+j] != src[r*lds+j] {
						t.Fatalf("%v path %v: dst[%d][%d] = %v, want %v", sz, path, r, j, dst[r*w+j], src[r*lds+j])
					}
				}
			}
			if dst[rows*w] != -1 || dst[rows*w+1] != -2 || dst[rows*w+2] != -3 {
				t.Fatalf("%v path %v: wrote past the rows: %v", sz, path, dst[rows*w:])
			}
		}
	}
}
