package classic

import (
	"math/rand/v2"
	"testing"

	"herd/env/internal/core"
	"herd/internal/rng"
)

func rngFor(name string) *rand.Rand { return rng.New(1, "test/"+name, 0) }

// benchEnv steps e with pre-drawn random actions, resetting on
// termination; it must not allocate.
func benchEnv(b *testing.B, e core.Env) {
	r := rng.New(1, "bench/actions", 0)
	const na = 1024
	acts := make([][]float32, na)
	for i := range acts {
		acts[i] = e.ActionSpace().SampleTo(nil, r)
	}
	e.Reset(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _, term, _, _, err := e.Step(acts[i&(na-1)])
		if err != nil {
			b.Fatal(err)
		}
		if term {
			e.Reset(core.NoSeed)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

func BenchmarkCartPole(b *testing.B) { benchEnv(b, NewCartPole(CartPoleConfig{})) }
func BenchmarkPendulum(b *testing.B) { benchEnv(b, NewPendulum(PendulumConfig{})) }
func BenchmarkMountainCar(b *testing.B) {
	benchEnv(b, NewMountainCar(MountainCarConfig{}))
}
func BenchmarkMountainCarContinuous(b *testing.B) {
	benchEnv(b, NewMountainCarContinuous(MountainCarConfig{}))
}
func BenchmarkAcrobot(b *testing.B) {
	a, _ := NewAcrobot(AcrobotConfig{})
	benchEnv(b, a)
}

// TestStepAllocs is the zero-allocation promise as a test.
func TestStepAllocs(t *testing.T) {
	for name, e := range allEnvs(t) {
		a := e.ActionSpace().SampleTo(nil, rngFor(name))
		e.Reset(1)
		allocs := testing.AllocsPerRun(1000, func() {
			if _, _, term, _, _, _ := e.Step(a); term {
				e.Reset(core.NoSeed)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per step", name, allocs)
		}
	}
}
