package envsvc

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herd/metrics/prom"
)

// serverMetrics are the env server's Prometheus collectors
// (Config.Registerer, `herd serve env --metrics-addr`), over gRPC and shm
// sessions alike; a nil *serverMetrics records nothing.
//
//	herd_env_server_sessions                live sessions
//	herd_env_server_sessions_opened_total   sessions opened
//	herd_env_server_sessions_refused_total  sessions refused: MaxSessions live already
//	herd_env_server_steps_total             env steps (each env of a batch counts)
//	herd_env_server_episodes_total          episodes ended (terminated or truncated)
//	herd_env_server_step_seconds            one batch step of a session's envs (histogram)
type serverMetrics struct {
	opened, refused, steps, episodes prometheus.Counter
	stepSeconds                      prometheus.Histogram
}

func newServerMetrics(reg prometheus.Registerer, s *Server) (*serverMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &serverMetrics{
		opened: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_server_sessions_opened_total", Help: "Sessions opened."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_server_sessions_refused_total",
			Help: "Sessions refused because MaxSessions were live already."}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_server_steps_total",
			Help: "Env steps taken (each env of a batch counts)."}),
		episodes: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_server_episodes_total",
			Help: "Episodes ended (terminated or truncated)."}),
		stepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_env_server_step_seconds",
			Help: "One batch step of a session's envs.", Buckets: prometheus.ExponentialBuckets(1e-6, 2.5, 16)}),
	}
	cs := []prometheus.Collector{m.opened, m.refused, m.steps, m.episodes, m.stepSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "herd_env_server_sessions", Help: "Live sessions."},
			func() float64 { return float64(len(s.sessions)) })}
	if err := prom.RegisterAll(reg, cs...); err != nil {
		return nil, fmt.Errorf("envsvc: metrics: %w", err)
	}
	return m, nil
}

func (m *serverMetrics) refuse() {
	if m != nil {
		m.refused.Inc()
	}
}

func (m *serverMetrics) open() {
	if m != nil {
		m.opened.Inc()
	}
}

func (m *serverMetrics) step(envs, ended int, t0 time.Time) {
	if m != nil {
		m.stepSeconds.Observe(time.Since(t0).Seconds())
		m.steps.Add(float64(envs))
		m.episodes.Add(float64(ended))
	}
}
