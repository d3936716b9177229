package bench

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinSelf: pinning sets every thread's affinity and GOMAXPROCS, as
// taskset -c would at start, and restore undoes both.
func TestPinSelf(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	restore, err := pinSelf([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(0, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(0) || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("pinned: affinity %d CPUs (cpu0 %v), GOMAXPROCS %d", got.Count(), got.IsSet(0), runtime.GOMAXPROCS(0))
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedGetaffinity(0, &got); err != nil {
		t.Fatal(err)
	}
	if got != before || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("restored: affinity %d CPUs, GOMAXPROCS %d; want %d, %d", got.Count(), runtime.GOMAXPROCS(0), before.Count(), procs)
	}
}
