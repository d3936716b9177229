package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herd/algo/algotest"
	"herd/env"
	"herd/transport"
)

// gather returns reg's series by name (histograms: name_sum, name_count).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name+"_sum"] = m.GetHistogram().GetSampleSum()
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// An env worker's and a policy worker's metrics agree with what the
// learner saw and with each other: steps cover the segments learned,
// every push and inference is timed once, batch-size histograms sum to the
// row and request counters, weights versions moved.
func TestWorkerMetrics(t *testing.T) {
	const iters, T, E = 12, 32, 4
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	opt := transport.Options{ObsDim: 4, OutDim: 2, Like: algotest.NewParams(), Capacity: 2}
	open := func() (transport.InferenceStream, transport.SampleStream, transport.ParamService) {
		inf, _ := ip.Inference(ctx, "m", opt)
		s, _ := ip.Samples(ctx, "m", opt)
		p, _ := ip.Params(ctx, "m", opt)
		t.Cleanup(func() { _ = inf.Close(); _ = s.Close(); _ = p.Close() })
		return inf, s, p
	}
	pieces := algotest.Pieces()
	envReg, polReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	em, err := NewEnvMetrics(envReg)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := NewPolicyMetrics(polReg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewEnvMetrics(envReg); err == nil {
		t.Error("registering an env worker's metrics twice on one registry: no error")
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	inf, _, p := open()
	if err := RegisterStreamStats(polReg, "inference", inf.Stats); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = RunPolicyWith(wctx, PolicyConfig{Metrics: pm}, pieces, inf, p) })
	inf2, s2, _ := open()
	envs := make([]env.Env, E)
	for j := range envs {
		e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		envs[j] = e
		defer e.Close()
	}
	wg.Go(func() {
		_ = RunEnv(wctx, EnvConfig{Slot: 0, Seed: 1, Envs: envs, Steps: T, Gamma: 0.99, Metrics: em}, pieces, inf2, s2)
	})
	_, s, lp := open()
	if _, err := RunLearner(ctx, LearnerConfig{Iterations: iters}, pieces, s, lp); err != nil {
		t.Fatal(err)
	}
	stop()
	wg.Wait()
	ev, pv := gather(t, envReg), gather(t, polReg)
	t.Logf("env worker %v\npolicy worker %v", ev, pv)
	if ev["herd_env_worker_steps_total"] < iters*T*E {
		t.Errorf("env steps %v < %d learned", ev["herd_env_worker_steps_total"], iters*T*E)
	}
	// A learner pulls a sample only once its push is queued; the last
	// push may be acknowledged after the worker was stopped.
	if n := ev["herd_env_worker_samples_pushed_total"]; n < iters-1 || n != ev["herd_env_worker_push_seconds_count"] {
		t.Errorf("pushed %v, push latencies %v, want ≥ %d and equal", n, ev["herd_env_worker_push_seconds_count"], iters-1)
	}
	// One inference per vector step, one more per segment, one per truncation.
	if n := ev["herd_env_worker_inference_seconds_count"]; n < ev["herd_env_worker_steps_total"]/E {
		t.Errorf("%v inferences for %v steps of %d envs", n, ev["herd_env_worker_steps_total"], E)
	}
	if ev["herd_env_worker_episodes_total"] == 0 {
		t.Error("no episode counted")
	}
	if ev["herd_env_worker_weights_version"] == 0 || pv["herd_policy_worker_weights_version"] == 0 {
		t.Errorf("weights versions did not move: env %v, policy %v", ev["herd_env_worker_weights_version"], pv["herd_policy_worker_weights_version"])
	}
	if ev["herd_env_worker_retries_total/infer"] != 0 || ev["herd_env_worker_retries_total/push"] != 0 {
		t.Errorf("retries in a healthy in-process run: %v", ev)
	}
	if pv["herd_policy_worker_rows_total"] != pv["herd_policy_worker_batch_rows_sum"] ||
		pv["herd_policy_worker_requests_total"] != pv["herd_policy_worker_batch_requests_sum"] ||
		pv["herd_policy_worker_batches_total"] != pv["herd_policy_worker_batch_rows_count"] ||
		pv["herd_policy_worker_batches_total"] != pv["herd_policy_worker_forward_seconds_count"] {
		t.Errorf("policy worker counters and histograms disagree: %v", pv)
	}
	// Every inference the env worker timed was answered by the policy worker.
	if pv["herd_policy_worker_requests_total"] < ev["herd_env_worker_inference_seconds_count"] {
		t.Errorf("policy worker answered %v requests, env worker timed %v", pv["herd_policy_worker_requests_total"], ev["herd_env_worker_inference_seconds_count"])
	}
	if _, ok := pv["herd_stream_abandoned_requests_total/inference"]; !ok {
		t.Error("no stream counters")
	}
}

// BenchmarkEnvMetricsStep is what an env worker's metrics add to one
// vector step: a clock read before and after the inference round trip, a
// histogram observation, a counter add and a gauge set.
func BenchmarkEnvMetricsStep(b *testing.B) {
	m, err := NewEnvMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		m.infer.Observe(since(t0))
		m.steps.Add(4)
		m.version.Set(float64(i))
	}
}
