package replaysvc

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herd/metrics/prom"
)

// serverMetrics are the replay server's Prometheus collectors
// (Config.Registerer, `herd serve replay --metrics-addr`); a nil
// *serverMetrics records nothing.
//
//	herd_replay_records                    records in the store
//	herd_replay_pushed_records_total       records pushed (UpdatePriorities' rewrites included)
//	herd_replay_sampled_records_total      records returned by Sample
//	herd_replay_sample_requests_total      Sample calls answered
//	herd_replay_sample_seconds             one Sample call in the store (histogram)
//
// The store adds its own (herd_persist_…: cache hits and misses, queue
// depths, task latencies, evictions, snapshots) when the same registerer
// is its persist.Options.Registerer.
type serverMetrics struct {
	pushed, sampled, samples prometheus.Counter
	sampleSeconds            prometheus.Histogram
}

func newServerMetrics(reg prometheus.Registerer, s *Server) (*serverMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &serverMetrics{
		pushed: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_replay_pushed_records_total",
			Help: "Records pushed (UpdatePriorities' rewrites included)."}),
		sampled: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_replay_sampled_records_total",
			Help: "Records returned by Sample."}),
		samples: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_replay_sample_requests_total",
			Help: "Sample calls answered."}),
		sampleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_replay_sample_seconds",
			Help: "One Sample call in the store.", Buckets: prometheus.ExponentialBuckets(1e-6, 2.5, 16)}),
	}
	cs := []prometheus.Collector{m.pushed, m.sampled, m.samples, m.sampleSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "herd_replay_records", Help: "Records in the store."},
			func() float64 { return float64(s.cfg.Store.Len()) })}
	if err := prom.RegisterAll(reg, cs...); err != nil {
		return nil, fmt.Errorf("replaysvc: metrics: %w", err)
	}
	return m, nil
}

func (m *serverMetrics) push(n int) {
	if m != nil {
		m.pushed.Add(float64(n))
	}
}

func (m *serverMetrics) sample(n int, t0 time.Time) {
	if m != nil {
		m.sampleSeconds.Observe(time.Since(t0).Seconds())
		m.samples.Inc()
		m.sampled.Add(float64(n))
	}
}
