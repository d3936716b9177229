package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Load for `herd bench learn --load N --pin LIST`: N busy-loop processes
// (not goroutines: what is measured is the OS scheduler sharing the cores
// between processes) run for the duration of each training run, and --pin
// restricts the training process to a set of CPUs, as `taskset -c` would,
// while the busy loops keep every CPU.

// loadWarmup lets the busy loops start spinning before a run begins.
const loadWarmup = 100 * time.Millisecond

// SpinCommand is the hidden `herd bench` subcommand a busy loop runs.
const SpinCommand = "spin"

// newSpinCmd is one busy-loop process of --load: it spins on one
// thread, on any CPU, until it is killed or interrupted, and dies with its
// parent (see startLoad).
func newSpinCmd() *cobra.Command {
	return &cobra.Command{
		Use:    SpinCommand,
		Short:  "spin on one CPU until killed (the busy loops of bench learn --load)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := unpinSelf(); err != nil {
				return fmt.Errorf("bench spin: %w", err)
			}
			spin(cmd.Context())
			return nil
		},
	}
}

// spin burns CPU until ctx is done.
func spin(ctx context.Context) {
	x := uint64(1)
	for ctx.Err() == nil {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if x == 0 { // keeps the loop from being optimised away
		fmt.Fprintln(os.Stderr, x)
	}
}

// busyLoops are the processes of --load.
type busyLoops struct{ procs []*exec.Cmd }

// startLoad starts n busy-loop processes (this binary's hidden `bench
// spin`). The caller stops them with stop; the kernel also kills them if
// this process dies (see loadAttr), so none outlives it.
func startLoad(n int) (*busyLoops, error) {
	l := &busyLoops{}
	if n == 0 {
		return l, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--load: %w", err)
	}
	for range n {
		c := exec.Command(exe, "bench", SpinCommand)
		c.Stderr = os.Stderr
		c.SysProcAttr = loadAttr()
		if err := c.Start(); err != nil {
			return nil, errors.Join(fmt.Errorf("--load: %w", err), l.stop())
		}
		l.procs = append(l.procs, c)
	}
	time.Sleep(loadWarmup)
	return l, nil
}

// stop kills the busy loops and waits for them.
func (l *busyLoops) stop() error {
	var errs []error
	for _, c := range l.procs {
		if err := c.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("--load: %w", err))
		}
		_ = c.Wait() // killed: its error is the signal
	}
	l.procs = nil
	return errors.Join(errs...)
}

// parseCPUList reads a CPU list as taskset -c takes it: "0", "0,2",
// "0-3", "0-1,4"; "all" is nil (no pinning).
func parseCPUList(s string) ([]int, error) {
	if s == "all" {
		return nil, nil
	}
	var cpus []int
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= 1024 {
			return nil, fmt.Errorf("--pin %q: want a CPU list such as 0, 0,1 or 0-3, or all", s)
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}

// loadSchedule is the --load and --pin settings of bench learn.
type loadSchedule struct {
	load int
	pins []string // labels as given; "" when --pin is absent
	cpus [][]int  // nil: not pinned
}

func newLoadSchedule(load int, pins []string) (*loadSchedule, error) {
	if load < 0 || load > 1024 {
		return nil, fmt.Errorf("bench learn: --load %d: want 0 … 1024 processes", load)
	}
	s := &loadSchedule{load: load}
	if len(pins) == 0 {
		s.pins, s.cpus = []string{""}, [][]int{nil}
		return s, nil
	}
	for _, p := range pins {
		cpus, err := parseCPUList(p)
		if err != nil {
			return nil, fmt.Errorf("bench learn: %w", err)
		}
		s.pins, s.cpus = append(s.pins, p), append(s.cpus, cpus)
	}
	return s, nil
}

// active reports whether rows carry load and pin columns.
func (s *loadSchedule) active() bool { return s.load > 0 || s.pins[0] != "" }

// loadRow is a bench learn row with the load it ran under.
type loadRow struct {
	Pin  string `json:"pin"`
	Load int    `json:"load"`
	LearnRow
}

// run trains every (config, seed) once per pin setting, in turn, each
// under its own fresh load, and stops at the first error (or
// cancellation) with the rows so far; the busy loops are stopped and the
// pinning undone before it returns, whatever happens.
func (s *loadSchedule) run(ctx context.Context, configs []string, seeds []uint64, opt LearnOptions) ([]LearnRow, []loadRow, error) {
	if len(configs) == 0 || len(seeds) == 0 {
		_, err := BenchLearn(ctx, configs, seeds, opt) // the usual error
		return nil, nil, err
	}
	var rows []LearnRow
	var lrows []loadRow
	repeated := len(slices.Compact(slices.Sorted(slices.Values(seeds)))) < len(seeds)
	for _, c := range configs {
		reps := map[uint64]int{}
		for _, seed := range seeds {
			reps[seed]++
			for i, label := range s.pins {
				if err := ctx.Err(); err != nil {
					return rows, lrows, err
				}
				o := opt
				if o.Out != "" {
					// Each run writes its own directory: one per pin setting
					// and, for a seed listed again, one per repetition.
					if len(s.pins) > 1 {
						o.Out = filepath.Join(o.Out, "pin-"+strings.ReplaceAll(pinLabel(label), ",", "_"))
					}
					if repeated {
						o.Out = filepath.Join(o.Out, fmt.Sprintf("rep-%d", reps[seed]))
					}
				}
				r, err := s.one(ctx, c, seed, s.cpus[i], o)
				rows = append(rows, r...)
				for _, x := range r {
					lrows = append(lrows, loadRow{Pin: pinLabel(label), Load: s.load, LearnRow: x})
				}
				if err != nil {
					return rows, lrows, err
				}
			}
		}
	}
	return rows, lrows, nil
}

// one trains one (config, seed) under the load, pinned to cpus (nil: not
// pinned).
func (s *loadSchedule) one(ctx context.Context, config string, seed uint64, cpus []int, opt LearnOptions) (rows []LearnRow, err error) {
	loops, err := startLoad(s.load)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, loops.stop()) }()
	if cpus != nil {
		restore, err := pinSelf(cpus)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, restore()) }()
	}
	return BenchLearn(ctx, []string{config}, []uint64{seed}, opt)
}

func pinLabel(p string) string {
	if p == "" {
		return "all"
	}
	return p
}

// writePinRatios prints, per config, the median wall time under each pin
// setting and its ratio to the last one's (medians: a loaded machine has
// outliers).
func writePinRatios(w io.Writer, rows []loadRow, pins []string) error {
	type key struct{ config, pin string }
	walls := map[key][]float64{}
	var order []string
	for _, r := range rows {
		if !slices.Contains(order, r.Config) {
			order = append(order, r.Config)
		}
		k := key{r.Config, r.Pin}
		walls[k] = append(walls[k], r.WallSeconds)
	}
	last := pinLabel(pins[len(pins)-1])
	for _, c := range order {
		if len(walls[key{c, last}]) == 0 {
			continue // a run failed before the reference pin ran: no ratio
		}
		ref := median(walls[key{c, last}])
		var parts []string
		for _, p := range pins {
			k := key{c, pinLabel(p)}
			if len(walls[k]) == 0 {
				continue
			}
			m := median(walls[k])
			parts = append(parts, fmt.Sprintf("pin %s %.2f s (%.2fx)", k.pin, m, m/ref))
		}
		if _, err := fmt.Fprintf(w, "%s, median wall over %d runs: %s\n", c, len(walls[key{c, last}]), strings.Join(parts, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// median of xs (NaN when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
