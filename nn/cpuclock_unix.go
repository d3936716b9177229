//go:build unix

package nn

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPUClock reads the CPU time all of this process's threads have
// used (CLOCK_PROCESS_CPUTIME_ID).
func processCPUClock() (func() time.Duration, error) {
	now := func() (time.Duration, error) {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
			return 0, err
		}
		return time.Duration(ts.Nano()), nil
	}
	if _, err := now(); err != nil {
		return nil, err
	}
	return func() time.Duration { d, _ := now(); return d }, nil
}
