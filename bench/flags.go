package bench

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// flagCheck collects flag errors: every bench command rejects a zero,
// negative or non-finite value where it means nothing, instead of quietly
// using a default.
type flagCheck struct {
	cmd  string
	errs []error
}

func (c *flagCheck) bad(flag string, format string, a ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: --%s: %s", c.cmd, flag, fmt.Sprintf(format, a...)))
}

// atLeast requires every value of an int flag (one or a list) to be ≥ lo.
func (c *flagCheck) atLeast(flag string, lo int64, vals ...int64) {
	for _, v := range vals {
		if v < lo {
			c.bad(flag, "must be >= %d, got %d", lo, v)
			return
		}
	}
}

// finite requires a float flag to be finite and within [lo, hi].
func (c *flagCheck) finite(flag string, v, lo, hi float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		c.bad(flag, "must be a number in [%v, %v], got %v", lo, hi, v)
	}
}

// durationAtLeast requires a duration flag to be ≥ lo.
func (c *flagCheck) durationAtLeast(flag string, lo, v time.Duration) {
	if v < lo {
		c.bad(flag, "must be >= %v, got %v", lo, v)
	}
}

func (c *flagCheck) err() error { return errors.Join(c.errs...) }

func ints[T ~int | ~int64](xs ...T) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}
