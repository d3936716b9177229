package mpe

import (
	"testing"

	"herd/env/internal/core"
)

// stepper is one scenario with fixed discrete actions, reset when the
// episode ends (as a vector env's autoreset would).
type stepper struct {
	e    *Env
	acts []map[string][]float32
}

func newStepper(tb testing.TB, e *Env, err error) *stepper {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := e.Reset(1); err != nil {
		tb.Fatal(err)
	}
	s := &stepper{e: e}
	// Five action maps, cycled: every movement (and symbol) is exercised.
	for k := range 5 {
		m := map[string][]float32{}
		for j, a := range e.PossibleAgents() {
			sp, _ := e.ActionSpace(a)
			v := make([]float32, sp.Dim())
			if e.continuous {
				for i := range v {
					v[i] = float32((k+i+j)%5) / 4
				}
			} else {
				v[0] = float32((k*7 + j*3) % sp.(core.Discrete).N)
			}
			m[a] = v
		}
		s.acts = append(s.acts, m)
	}
	return s
}

func (s *stepper) step(i int) error {
	if len(s.e.Agents()) == 0 {
		if _, _, err := s.e.Reset(-1); err != nil {
			return err
		}
	}
	_, _, _, _, _, err := s.e.Step(s.acts[i%len(s.acts)])
	return err
}

func benchStep(b *testing.B, e *Env, err error) {
	s := newStepper(b, e, err)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.step(i); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "env-steps/s")
	b.ReportMetric(float64(b.N*len(e.PossibleAgents()))/sec, "agent-steps/s")
}

// BenchmarkStep is one parallel step of each scenario with default
// keywords (all agents act; resets included every max_cycles steps), as
// testdata/gen/bench_pettingzoo.py times PettingZoo's parallel_env.
func BenchmarkStep(b *testing.B) {
	b.Run("simple_spread_v3", func(b *testing.B) {
		e, err := NewSimpleSpread(DefaultSpreadConfig())
		benchStep(b, e, err)
	})
	b.Run("simple_tag_v3", func(b *testing.B) {
		e, err := NewSimpleTag(DefaultTagConfig())
		benchStep(b, e, err)
	})
	b.Run("simple_reference_v3", func(b *testing.B) {
		e, err := NewSimpleReference(DefaultReferenceConfig())
		benchStep(b, e, err)
	})
}

// TestStepAllocatesNothing pins the zero-allocation step of every scenario.
func TestStepAllocatesNothing(t *testing.T) {
	for _, mk := range []func() (*Env, error){
		func() (*Env, error) { return NewSimpleSpread(DefaultSpreadConfig()) },
		func() (*Env, error) { return NewSimpleTag(DefaultTagConfig()) },
		func() (*Env, error) {
			return NewSimpleReference(ReferenceConfig{LocalRatio: 0.5, MaxCycles: 25, ContinuousActions: true})
		},
	} {
		e, err := mk()
		s := newStepper(t, e, err)
		i := 0
		if n := testing.AllocsPerRun(200, func() {
			if err := s.step(i); err != nil {
				t.Fatal(err)
			}
			i++
		}); n != 0 {
			t.Fatalf("%s: %v allocations per step", s.e.Name(), n)
		}
	}
}
