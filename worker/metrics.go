package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herd/metrics/prom"
	"herd/transport"
)

// EnvMetrics are an env worker's Prometheus collectors (`herd worker --role
// env --metrics-addr`). A nil *EnvMetrics records nothing: the step loop
// pays one nil check when metrics are off.
//
//	herd_env_worker_steps_total              env steps taken (all envs of the worker)
//	herd_env_worker_episodes_total           episodes finished
//	herd_env_worker_samples_pushed_total     samples (segments or transition chunks) acknowledged by a learner
//	herd_env_worker_weights_version          weights version that acted on the last step
//	herd_env_worker_inference_seconds        inference round trip, retries included (histogram; on-policy only)
//	herd_env_worker_push_seconds             sample push, back-pressure and retries included (histogram)
//	herd_env_worker_retries_total{call}      calls retried after a timeout or a transient error, by call (infer, push)
//	herd_env_worker_stale_starts_total       inline segments started on old weights: no newer version within Timeouts.Weights
type EnvMetrics struct {
	steps, episodes, pushed prometheus.Counter
	staleStarts             prometheus.Counter
	version                 prometheus.Gauge
	infer, push             prometheus.Histogram
	inferRetries            prometheus.Counter
	pushRetries             prometheus.Counter
}

// latencyBuckets span 50 µs (an in-process round trip) to 30 s (the push
// timeout).
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2.5, 14)

// NewEnvMetrics registers an env worker's collectors on reg.
func NewEnvMetrics(reg prometheus.Registerer) (*EnvMetrics, error) {
	retries := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "herd_env_worker_retries_total",
		Help: "Calls retried after a timeout or a transient error, by call."}, []string{"call"})
	m := &EnvMetrics{
		steps:    prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_worker_steps_total", Help: "Env steps taken by the worker's envs."}),
		episodes: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_worker_episodes_total", Help: "Episodes finished."}),
		pushed: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_worker_samples_pushed_total",
			Help: "Samples (segments or transition chunks) acknowledged by a learner."}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "herd_env_worker_weights_version",
			Help: "Weights version that acted on the last step."}),
		infer: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_env_worker_inference_seconds",
			Help: "Inference round trip to a policy worker, retries included.", Buckets: latencyBuckets}),
		push: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_env_worker_push_seconds",
			Help: "Sample push to a learner, back-pressure and retries included.", Buckets: latencyBuckets}),
		staleStarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_env_worker_stale_starts_total",
			Help: "Inline segments started on old weights: no newer version came within the wait's timeout."}),
		inferRetries: retries.WithLabelValues("infer"),
		pushRetries:  retries.WithLabelValues("push"),
	}
	if err := register(reg, m.steps, m.episodes, m.pushed, m.staleStarts, m.version, m.infer, m.push, retries); err != nil {
		return nil, err
	}
	return m, nil
}

// staleStart counts a segment started on old weights.
func (m *EnvMetrics) staleStart() {
	if m != nil {
		m.staleStarts.Inc()
	}
}

// PolicyMetrics are a policy worker's Prometheus collectors (`herd worker
// --role policy --metrics-addr`); a nil *PolicyMetrics records nothing.
//
//	herd_policy_worker_batches_total         batched forward passes
//	herd_policy_worker_requests_total        inference requests answered
//	herd_policy_worker_rows_total            observations answered
//	herd_policy_worker_batch_rows            observations per batch (histogram)
//	herd_policy_worker_batch_requests        requests per batch (histogram)
//	herd_policy_worker_forward_seconds       one batch's forward pass (histogram)
//	herd_policy_worker_weights_version       weights version it answers with
type PolicyMetrics struct {
	batches, requests, rows prometheus.Counter
	batchRows, batchReqs    prometheus.Histogram
	forward                 prometheus.Histogram
	version                 prometheus.Gauge
}

// NewPolicyMetrics registers a policy worker's collectors on reg.
func NewPolicyMetrics(reg prometheus.Registerer) (*PolicyMetrics, error) {
	sizes := prometheus.ExponentialBuckets(1, 2, 14) // 1 … 8192
	m := &PolicyMetrics{
		batches:  prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_policy_worker_batches_total", Help: "Batched forward passes."}),
		requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_policy_worker_requests_total", Help: "Inference requests answered."}),
		rows:     prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_policy_worker_rows_total", Help: "Observations answered."}),
		batchRows: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_policy_worker_batch_rows",
			Help: "Observations per batched forward pass.", Buckets: sizes}),
		batchReqs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_policy_worker_batch_requests",
			Help: "Inference requests per batched forward pass.", Buckets: sizes}),
		forward: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_policy_worker_forward_seconds",
			Help: "One batch's forward pass.", Buckets: prometheus.ExponentialBuckets(1e-6, 2.5, 16)}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "herd_policy_worker_weights_version",
			Help: "Weights version the worker answers with."}),
	}
	if err := register(reg, m.batches, m.requests, m.rows, m.batchRows, m.batchReqs, m.forward, m.version); err != nil {
		return nil, err
	}
	return m, nil
}

// RegisterStreamStats registers a stream's or service's counters
// (transport.Stats, read at each scrape) on reg under the label
// stream=name:
//
//	herd_stream_malformed_messages_total{stream}       messages dropped: did not decode
//	herd_stream_wrong_protocol_messages_total{stream}  messages dropped: another protocol version
//	herd_stream_duplicate_samples_total{stream}        repeated pushes acknowledged, not queued again
//	herd_stream_weights_fetch_failed_total{stream}     weights versions not downloaded in time
//	herd_stream_abandoned_requests_total{stream}       inference requests skipped: their sender had left
//	herd_stream_shed_pushes_total{stream}              pushes refused at runtime.held_bytes (re-sent)
//	herd_stream_observation_bytes_total{stream}        observation bytes inference requests carried
//	herd_stream_queued_samples{stream}                 samples acknowledged, waiting in the learner's queue
func RegisterStreamStats(reg prometheus.Registerer, name string, stats func() transport.Stats) error {
	c := func(metric, help string, v func(transport.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metric, Help: help,
			ConstLabels: prometheus.Labels{"stream": name}}, func() float64 { return float64(v(stats())) })
	}
	return register(reg,
		c("herd_stream_malformed_messages_total", "Messages dropped because they did not decode or were inconsistent.",
			func(s transport.Stats) uint64 { return s.Malformed }),
		c("herd_stream_wrong_protocol_messages_total", "Messages dropped because they speak another protocol version.",
			func(s transport.Stats) uint64 { return s.WrongProtocol }),
		c("herd_stream_duplicate_samples_total", "Repeated pushes of a sample already queued (acknowledged, not queued again).",
			func(s transport.Stats) uint64 { return s.Duplicates }),
		c("herd_stream_weights_fetch_failed_total", "Weights versions announced but not downloaded in time.",
			func(s transport.Stats) uint64 { return s.FetchFailed }),
		c("herd_stream_abandoned_requests_total", "Inference requests skipped because their sender had stopped waiting.",
			func(s transport.Stats) uint64 { return s.Abandoned }),
		c("herd_stream_observation_bytes_total", "Observation bytes the stream's inference requests carried (smallest exact encoding).",
			func(s transport.Stats) uint64 { return s.ObsBytes }),
		c("herd_stream_shed_pushes_total", "Sample pushes refused unacknowledged at runtime.held_bytes (their pushers send them again).",
			func(s transport.Stats) uint64 { return s.Shed }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "herd_stream_queued_samples", Help: "Samples acknowledged and waiting in the learner's queue.",
			ConstLabels: prometheus.Labels{"stream": name}}, func() float64 { return float64(stats().Queued) }),
	)
}

// register registers every collector on reg, or none.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return errors.New("worker: metrics need a registerer")
	}
	if err := prom.RegisterAll(reg, cs...); err != nil {
		return fmt.Errorf("worker: metrics: %w", err)
	}
	return nil
}

// since returns the seconds from t0 to now.
func since(t0 time.Time) float64 { return time.Since(t0).Seconds() }

// push sends one sample (msg, which the stream then owns) with retries and
// counts it, its latency and its episodes in met when met is set.
func push(t *callTimer, samples transport.SampleStream, id transport.SampleID, msg []byte, met *EnvMetrics, episodes int) error {
	var t0 time.Time
	if met != nil {
		t0 = time.Now()
	}
	if err := retry(t, func(c context.Context) error { return samples.Push(c, id, msg) }); err != nil {
		return err
	}
	if met != nil {
		met.push.Observe(since(t0))
		met.pushed.Inc()
		met.episodes.Add(float64(episodes))
	}
	return nil
}
