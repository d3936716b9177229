//go:build unix

package minatar

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU adds the process CPU time per operation (user + system) to a
// benchmark, a figure that shared cores inflate much less than wall time.
func reportCPU(b *testing.B) (stop func()) {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
