package bench

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// loadAttr makes the kernel kill a busy loop when the thread that started
// it exits, so that a crashed or killed herd leaves none behind.
func loadAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// pinSelf restricts every thread of this process to cpus (new threads
// inherit it) and sets GOMAXPROCS to their number, as starting the process
// under `taskset -c` would; restore undoes both.
func pinSelf(cpus []int) (restore func() error, err error) {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return nil, fmt.Errorf("--pin: %w", err)
	}
	if err := setAllThreads(&set); err != nil {
		_ = setAllThreads(&orig)
		return nil, fmt.Errorf("--pin: %w", err)
	}
	procs := runtime.GOMAXPROCS(len(cpus))
	return func() error {
		runtime.GOMAXPROCS(procs)
		if err := setAllThreads(&orig); err != nil {
			return fmt.Errorf("--pin: restore: %w", err)
		}
		return nil
	}, nil
}

// unpinSelf lets every thread of this process run on any CPU.
func unpinSelf() error {
	var all unix.CPUSet
	for c := range 1024 {
		all.Set(c) // the kernel keeps the online, permitted ones
	}
	return setAllThreads(&all)
}

// setAllThreads sets the affinity of every thread of the process, listing
// /proc/self/task until no new thread appears (a thread started meanwhile
// inherits its creator's, possibly old, affinity).
func setAllThreads(set *unix.CPUSet) error {
	done := map[int]bool{}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}
