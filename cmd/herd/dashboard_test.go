package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"herd/algo"
	"herd/algo/ppo"
	"herd/metrics"
	"herd/metrics/prom"
	"herd/replay/persist"
	"herd/service/envsvc"
	"herd/service/replaysvc"
	"herd/transport"
	"herd/worker"
)

// exported gathers what every herd process serves at --metrics-addr: the
// learner's Live (after one row of PPO with the dist executor's scalars),
// an env worker's, a policy worker's and their streams' collectors, an env
// server's, and a replay server's over a store. It returns the series names
// (histograms with their _bucket, _sum and _count) and, per label name,
// the label values seen.
func exported(t *testing.T) (names map[string]bool, labels map[string][]string) {
	t.Helper()
	reg := prom.NewRegistry()
	live := prom.NewLive()
	if err := reg.Register(live); err != nil {
		t.Fatal(err)
	}
	rec, err := metrics.NewRecorder(metrics.Options{Dir: t.TempDir(), Algo: "ppo", Env: "CartPole-v1", Seed: 1, TotalSteps: 10,
		LogEvery: 10, Scalars: append(ppo.Scalars(), algo.DistScalars...), Live: live})
	if err != nil {
		t.Fatal(err)
	}
	rec.Episode(10, 1, 10)
	for _, s := range append(ppo.Scalars(), algo.DistScalars...) {
		rec.Scalar(s, 1)
	}
	rec.Step(10)
	if _, err := rec.Close(false); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.NewEnvMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.NewPolicyMetrics(reg); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"inference", "samples", "params"} {
		if err := worker.RegisterStreamStats(reg, s, func() transport.Stats { return transport.Stats{} }); err != nil {
			t.Fatal(err)
		}
	}
	if err := envsvc.New(envsvc.Config{}).RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	samplers := []persist.Sampler{persist.NewUniform("uniform")}
	store, err := persist.Open(context.Background(), persist.Options{Mode: persist.Memory, Samplers: samplers, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := replaysvc.New(replaysvc.Config{Store: store, Samplers: samplers, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names, labels = map[string]bool{}, map[string][]string{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		if mf.GetType().String() == "HISTOGRAM" {
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(labels[lp.GetName()], lp.GetValue()) {
					labels[lp.GetName()] = append(labels[lp.GetName()], lp.GetValue())
				}
			}
		}
	}
	return names, labels
}

var (
	metricName = regexp.MustCompile(`\bherd_[a-zA-Z0-9_]*`)
	matcher    = regexp.MustCompile(`\b([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// deploy/grafana/herd.json queries only what herd exports: every herd_…
// name in its PromQL is a series some herd process serves, and every label
// matcher on a herd label (tag, stream, call, queue, …) matches a value
// herd serves; so a renamed metric breaks this test, not the dashboard.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	names, labels := exported(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "herd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	exprs := 0
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			ns := metricName.FindAllString(tg.Expr, -1)
			if len(ns) == 0 {
				t.Errorf("panel %q: %q queries no herd metric", p.Title, tg.Expr)
			}
			for _, n := range ns {
				used[n] = true
				if !names[n] {
					t.Errorf("panel %q: %q: herd exports no %s", p.Title, tg.Expr, n)
				}
			}
			for _, m := range matcher.FindAllStringSubmatch(tg.Expr, -1) {
				vals, ok := labels[m[1]]
				if !ok {
					t.Errorf("panel %q: %q: no herd metric has label %s", p.Title, tg.Expr, m[1])
					continue
				}
				re, err := regexp.Compile("^(?:" + m[3] + ")$")
				if err != nil {
					t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
					continue
				}
				hit := false
				for _, v := range vals {
					hit = hit || (m[2] == "=" && v == m[3]) || (m[2] == "=~" && re.MatchString(v)) || m[2] == "!=" || m[2] == "!~"
				}
				if !hit {
					t.Errorf("panel %q: %q: %s%s%q matches none of %v", p.Title, tg.Expr, m[1], m[2], m[3], vals)
				}
			}
		}
	}
	if exprs < 20 {
		t.Errorf("the dashboard has %d queries", exprs)
	}
	// What the dashboard is for: each of these is queried.
	for _, n := range []string{"herd_env_steps_total", "herd_episode_return_mean", "herd_scalar", "herd_env_worker_inference_seconds_bucket",
		"herd_env_worker_push_seconds_bucket", "herd_env_worker_retries_total", "herd_policy_worker_batch_rows_bucket",
		"herd_replay_records", "herd_replay_sampled_records_total", "herd_persist_cache_hits_total", "herd_env_worker_weights_version"} {
		if !used[n] {
			t.Errorf("the dashboard does not query %s", n)
		}
	}
	// The check itself catches a name herd does not export.
	if names["herd_env_steps"] || !names["herd_env_steps_total"] {
		t.Error("exported names are wrong")
	}
}
