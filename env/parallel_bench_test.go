package env

import "testing"

// BenchmarkFlatVector steps simple_spread as 16 envs × 3 agent rows (the
// IPPO config's shape): what a shared-parameter learner's env worker pays
// per step on top of the MPE dynamics (maps, copies, padding, one-hot).
func BenchmarkFlatVector(b *testing.B) {
	for _, id := range []string{"mpe/simple_spread_v3?agent_id=true", "mpe/simple_spread_v3?agent_id=true&state=true"} {
		b.Run(id, func(b *testing.B) {
			v, err := MakeVector(id, 48, Sync, WithEpisodeStatistics())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Reset(1); err != nil {
				b.Fatal(err)
			}
			acts := make([]float32, 48)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for r := range acts {
					acts[r] = float32((i + r) % 5)
				}
				if _, err := v.Step(acts); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*16)/sec, "env-steps/s")
			b.ReportMetric(float64(b.N*48)/sec, "agent-steps/s")
		})
	}
}
