package main

// Live scrapes of every --metrics-addr endpoint: herd serve env, herd serve
// replay, and the learner, policy worker and env workers of herd launch.
// Each test scrapes twice and checks that the values moved between the
// scrapes, by exactly what the test did where it drives the process.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd/env"
	"herd/metrics/prom"
	"herd/service/replaysvc"
)

// startServeMetrics runs `herd serve ARGS --addr 127.0.0.1:0
// --metrics-addr 127.0.0.1:0` until the test ends and returns the service
// address and the metrics URL it printed.
func startServeMetrics(t *testing.T, args ...string) (addr, url string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs(append(append([]string{"serve"}, args...), "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"))
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	lines := bufio.NewReader(pr)
	for addr == "" || url == "" {
		line, err := lines.ReadString('\n')
		if err != nil {
			cancel()
			t.Fatalf("serve %v: %v (%v)", args, err, <-done)
		}
		if _, rest, ok := strings.Cut(line, "herd: serving "); ok {
			addr = strings.Fields(rest[strings.Index(rest, " on ")+4:])[0]
		}
		if _, u, ok := strings.Cut(line, "metrics for Prometheus at "); ok {
			url = strings.TrimSpace(u)
		}
	}
	go io.Copy(io.Discard, lines)
	t.Cleanup(func() {
		cancel()
		if err := <-done; exitCode(err) != exitInterrupted {
			t.Errorf("serve %v stopped: %v, want a clean interruption", args, err)
		}
	})
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("metrics endpoint %s is not on loopback", url)
	}
	return addr, url
}

func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := prom.Scrape(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// want checks that each series has the value given.
func want(t *testing.T, what string, m map[string]float64, vals map[string]float64) {
	t.Helper()
	for k, v := range vals {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s: %s = %v (present %v), want %v", what, k, got, ok, v)
		}
	}
}

// herd serve env --metrics-addr counts sessions, env steps and step
// batches exactly as a client drives them.
func TestServeEnvMetricsLive(t *testing.T) {
	addr, url := startServeMetrics(t, "env")
	const n = 4
	v, err := envMaker().MakeVector("grpc://"+addr+"/CartPole-v1", n, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Reset(1); err != nil {
		t.Fatal(err)
	}
	acts := make([]float32, n)
	step := func(k int) {
		for range k {
			if _, err := v.Step(acts); err != nil {
				t.Fatal(err)
			}
		}
	}
	step(10)
	m1 := scrape(t, url)
	want(t, "after 10 batches", m1, map[string]float64{"herd_env_server_sessions": 1, "herd_env_server_sessions_opened_total": 1,
		"herd_env_server_steps_total": 10 * n, "herd_env_server_step_seconds_count": 10})
	step(25) // always action 0: CartPole falls within 25 steps, so episodes end
	m2 := scrape(t, url)
	want(t, "after 35 batches", m2, map[string]float64{"herd_env_server_steps_total": 35 * n, "herd_env_server_step_seconds_count": 35})
	if m2["herd_env_server_episodes_total"] <= m1["herd_env_server_episodes_total"] {
		t.Errorf("herd_env_server_episodes_total did not move: %v then %v", m1["herd_env_server_episodes_total"], m2["herd_env_server_episodes_total"])
	}
	if m2["process_cpu_seconds_total"] == 0 && m2["go_goroutines"] == 0 {
		t.Error("no Go runtime or process metrics")
	}
}

// herd serve replay --metrics-addr counts records, pushes, samples and the
// store's cache hits exactly as a client drives them.
func TestServeReplayMetricsLive(t *testing.T) {
	addr, url := startServeMetrics(t, "replay", "--dir", filepath.Join(t.TempDir(), "store"), "--mode", "hybrid")
	c, err := replaysvc.Dial(addr, replaysvc.ClientOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	push := func(from, to int) {
		var recs []replaysvc.Record
		for i := from; i < to; i++ {
			recs = append(recs, replaysvc.Record{Key: "k" + strconv.Itoa(i), Value: []byte("v")})
		}
		if err := c.Push(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	push(0, 10)
	if got, err := c.Sample(ctx, 4, ""); err != nil || len(got) != 4 {
		t.Fatalf("sample: %v %v", got, err)
	}
	m1 := scrape(t, url)
	want(t, "after 10 pushed, 4 sampled", m1, map[string]float64{"herd_replay_records": 10, "herd_replay_pushed_records_total": 10,
		"herd_replay_sampled_records_total": 4, "herd_replay_sample_requests_total": 1, "herd_replay_sample_seconds_count": 1,
		"herd_persist_cache_hits_total": 4, "herd_persist_cache_misses_total": 0})
	push(10, 25)
	for range 3 {
		if _, err := c.Sample(ctx, 5, ""); err != nil {
			t.Fatal(err)
		}
	}
	m2 := scrape(t, url)
	want(t, "after 25 pushed, 19 sampled", m2, map[string]float64{"herd_replay_records": 25, "herd_replay_pushed_records_total": 25,
		"herd_replay_sampled_records_total": 19, "herd_replay_sample_requests_total": 4, "herd_persist_cache_hits_total": 19})
}

// freePorts finds n consecutive free loopback ports below Linux's
// ephemeral range (32768 and up by default), so that no outgoing
// connection of the run (NATS clients) is given one of them before the
// workers bind them.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	start := 20000 + (os.Getpid()*7919)%10000 // spread concurrent test processes
	for base := start; base+n < 32768; base += n {
		var ls []net.Listener
		ok := true
		for k := range n {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+k))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports below 32768")
	return 0
}

// herd launch --metrics-addr HOST:PORT serves the learner at PORT, the
// policy worker at PORT+1 and the env workers at PORT+2, PORT+3: a scrape
// of each during the run sees its counters move.
func TestLaunchMetricsAllEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	t.Setenv("HERD_TEST_AS_HERD", "1")
	base := freePorts(t, 4)
	cmd := newLaunchCmdWith(testSpecs, []string{os.Args[0]})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--config", writeDistConfig(t, 100000), "--out", filepath.Join(t.TempDir(), "run"),
		"--quiet", "--metrics-addr", "127.0.0.1:" + strconv.Itoa(base)})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() { cancel(); <-done }()
	url := func(k int) string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", base+k) }
	// The counter that must move at each endpoint, and series that must be there.
	endpoints := []struct {
		name, counter string
		present       []string
	}{
		{"learner", "herd_env_steps_total", []string{"herd_episodes_total", `herd_scalar{tag="dist/lag_mean"}`}},
		{"policy-0", "herd_policy_worker_rows_total", []string{"herd_policy_worker_batch_rows_count", "herd_policy_worker_weights_version",
			"herd_policy_worker_forward_seconds_count", `herd_stream_abandoned_requests_total{stream="inference"}`}},
		{"env-0", "herd_env_worker_steps_total", []string{"herd_env_worker_inference_seconds_count", "herd_env_worker_weights_version",
			`herd_env_worker_retries_total{call="infer"}`, `herd_stream_duplicate_samples_total{stream="samples"}`}},
		{"env-1", "herd_env_worker_samples_pushed_total", []string{"herd_env_worker_push_seconds_count", "herd_env_worker_episodes_total"}},
	}
	for k, e := range endpoints {
		var first float64
		var last map[string]float64
		moved := false
		for !moved && ctx.Err() == nil {
			m, err := prom.Scrape(ctx, url(k))
			switch v, ok := m[e.counter]; {
			case err != nil || !ok || v == 0:
				// not up yet, or nothing counted yet
			case first == 0:
				first = v
			case v > first:
				moved, last = true, m
			}
			if !moved {
				time.Sleep(50 * time.Millisecond)
			}
		}
		if !moved {
			t.Fatalf("%s (%s): %s did not move from %v", e.name, url(k), e.counter, first)
		}
		for _, p := range e.present {
			if _, ok := last[p]; !ok {
				t.Errorf("%s: no %s in the scrape", e.name, p)
			}
		}
		for series := range last { // numbers only: no URL (the NATS URL may hold a password), no path
			if strings.Contains(series, "://") || strings.Contains(series, "nats") || strings.Contains(series, "/tmp") {
				t.Errorf("%s: the scrape exposes %s", e.name, series)
			}
		}
		t.Logf("%s: %s moved from %v to %v", e.name, e.counter, first, last[e.counter])
	}
}
