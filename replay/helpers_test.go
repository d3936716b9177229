package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// makeBatch returns n transitions with ids first … first+n-1; every field
// of a transition encodes its id, so a torn read shows up as fields that
// disagree (see checkRow).
func makeBatch(n, obsSize, actSize int, first int) *Batch {
	b := &Batch{}
	b.Resize(n, obsSize, actSize)
	for i := 0; i < n; i++ {
		id := float32(first + i)
		for j := 0; j < obsSize; j++ {
			b.Obs[i*obsSize+j] = id
			b.NextObs[i*obsSize+j] = id + 0.5
		}
		for j := 0; j < actSize; j++ {
			b.Action[i*actSize+j] = -id
		}
		b.Reward[i] = id
		b.Terminated[i] = (first+i)%3 == 0
		b.Truncated[i] = (first+i)%5 == 0
	}
	return b
}

// checkRow returns the id of row i of s, or -1 if its fields disagree.
func checkRow(s *Sample, i, obsSize, actSize int) int {
	id := s.Reward[i]
	for j := 0; j < obsSize; j++ {
		if s.Obs[i*obsSize+j] != id || s.NextObs[i*obsSize+j] != id+0.5 {
			return -1
		}
	}
	for j := 0; j < actSize; j++ {
		if s.Action[i*actSize+j] != -id {
			return -1
		}
	}
	n := int(id)
	if s.Terminated[i] != (n%3 == 0) || s.Truncated[i] != (n%5 == 0) {
		return -1
	}
	return n
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func mustPrioritized(t testing.TB, cfg Config) *Prioritized {
	t.Helper()
	p, err := NewPrioritized(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type rngT = rand.Rand

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
