package distexec_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd/algo"
	"herd/internal/fakealgo"
	"herd/run"
)

// The dist executor runs through algo.TrainRun like any other: the run
// directory gets its files and the summary counts every step and episode,
// on the in-process twin and on an embedded NATS server.
func TestTrainRun(t *testing.T) {
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			dir := t.TempDir()
			h := algo.DefaultHeader()
			h.Algo, h.Env, h.Steps, h.Out, h.LogEvery = "fake", "CartPole-v1", 4*32*10, dir, 128
			h.Runtime = algo.RuntimeConfig{Executor: "dist", EnvWorkers: 2, PolicyWorkers: 2, Transport: tr}
			if err := h.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			spec := fakealgo.Spec()
			res := &algo.Resolved{Header: h, Spec: spec, Config: spec.NewConfig()}
			sum, err := algo.TrainRun(ctx, res, algo.RunOptions{Executors: run.Executors()})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Steps != h.Steps || sum.Episodes == 0 {
				t.Errorf("summary: %d steps (want %d), %d episodes", sum.Steps, h.Steps, sum.Episodes)
			}
			for _, f := range []string{"config.yaml", "metrics.csv", "summary.json", "model.safetensors"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestBadRuntime(t *testing.T) {
	for _, rc := range []algo.RuntimeConfig{
		{Executor: "dist", Transport: "carrier-pigeon"},
		{Executor: "local", Transport: "nats"},
		{Executor: "dist", NATSURL: "nats://127.0.0.1:1"},
		{Executor: "dist", Alpha: 3},
	} {
		if err := rc.Validate(); err == nil {
			t.Errorf("%+v: no error", rc)
		}
	}
}
