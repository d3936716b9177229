package kernel

import "time"

// PeakFLOPs measures one core's float32 peak: FLOPs per second of a loop
// of independent FMAs on the widest registers the fastest path uses
// (16 lanes with AVX-512, 8 with AVX2; 2 FLOPs per lane). It is the
// product cores × clock × FMA units × lanes × 2 measured rather than
// computed, so it holds the clock the CPU actually runs and its FMA width
// (a CPU that splits 512-bit FMAs in two gives the AVX2 figure). The best
// of a few 2 ms runs is taken, so time the machine lends elsewhere counts
// less. It is the machine's figure whichever path HERD_KERNELS picks, and
// 0 where the build or CPU has no assembly path.
func PeakFLOPs() float64 {
	if maxLevel == Portable {
		return 0
	}
	const iters = 200_000
	best := 0.0
	for range 8 {
		t0 := time.Now()
		lanes := fmaLoop(maxLevel, iters)
		d := time.Since(t0).Seconds()
		if f := float64(iters) * 12 * float64(lanes) * 2 / d; f > best {
			best = f
		}
	}
	return best
}
