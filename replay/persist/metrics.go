package persist

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herd/metrics/prom"
)

// metrics are registered on Options.Registerer; a nil *metrics records
// nothing, so the hot path pays one nil check when metrics are off.
type metrics struct {
	taskSeconds *prometheus.HistogramVec
	byKind      [numTaskKinds]prometheus.Observer
	evictions   prometheus.Counter
	populates   prometheus.Counter
	snapshots   *prometheus.CounterVec
	reg         prometheus.Registerer
	all         []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer, s *Store) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		taskSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herd_persist_task_seconds",
			Help:    "Time from enqueue to the end of a task's application, by task kind.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
		}, []string{"kind"}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herd_persist_evictions_total", Help: "Cache entries evicted to Pebble."}),
		populates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herd_persist_populates_total", Help: "Cold reads copied back into the cache."}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herd_persist_snapshots_total", Help: "Snapshots attempted, by result."}, []string{"result"}),
	}
	for k := taskKind(0); k < numTaskKinds; k++ {
		m.byKind[k] = m.taskSeconds.WithLabelValues(k.String())
	}
	depth := func(name string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herd_persist_queue_depth", Help: "Tasks waiting, by queue.",
			ConstLabels: prometheus.Labels{"queue": name}}, f)
	}
	cs := []prometheus.Collector{
		m.taskSeconds, m.evictions, m.populates, m.snapshots,
		depth("p0", func() float64 { return float64(s.q.Len(0)) }),
		depth("p1", func() float64 { return float64(s.q.Len(1)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herd_persist_cache_bytes", Help: "Bytes held by the hot cache."},
			func() float64 { return float64(s.Stats().CacheBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herd_persist_pending", Help: "Writes accepted but not yet applied."},
			func() float64 { return float64(s.Stats().Pending) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herd_persist_cache_hits_total", Help: "Records read (Get, Sample) from memory: the cache or writes not yet applied."},
			func() float64 { return float64(s.cacheHits.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herd_persist_cache_misses_total", Help: "Records read (Get, Sample) from Pebble."},
			func() float64 { return float64(s.cacheMisses.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herd_persist_restore_skipped_snapshots",
			Help: "Snapshots newer than the one restored at Open, skipped because their manifest is corrupt."},
			func() float64 { return float64(len(s.restored.Skipped)) }),
	}
	if err := prom.RegisterAll(reg, cs...); err != nil {
		return nil, err
	}
	m.reg, m.all = reg, cs
	return m, nil
}

// unregister lets a store reopened on the same registry register again.
func (m *metrics) unregister() {
	if m == nil {
		return
	}
	for _, c := range m.all {
		m.reg.Unregister(c)
	}
}

func (m *metrics) observe(k taskKind, enq time.Time) {
	if m == nil || enq.IsZero() {
		return
	}
	m.byKind[k].Observe(time.Since(enq).Seconds())
}
