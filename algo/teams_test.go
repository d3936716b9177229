package algo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/env"
	"herd/nn"
)

type recLog struct {
	discard
	scalars map[string][]float64
}

func (l *recLog) Scalar(name string, v float64) { l.scalars[name] = append(l.scalars[name], v) }

// TestTeamLog checks each team's return of simple_tag (3 adversaries, 1
// good agent; 2 envs of 5 steps): the sum of the team's agents' rewards
// over an episode of one env, averaged over the episodes so far.
func TestTeamLog(t *testing.T) {
	v, err := env.MakeVector("mpe/simple_tag_v3?max_cycles=5", 8, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	log := &recLog{scalars: map[string][]float64{}}
	tv := TeamLog(v, log)
	defer tv.Close()
	if _, ok := env.RowsOf(tv); !ok {
		t.Fatal("the wrapper hides the row layout")
	}
	if _, err := tv.Reset(2); err != nil {
		t.Fatal(err)
	}
	acts := []float32{1, 2, 3, 4, 1, 1, 1, 1}
	var adv, good []float64 // per episode, in order of ending
	sumA, sumG := make([]float64, 2), make([]float64, 2)
	for range 10 {
		b, err := tv.Step(acts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			sumA[i] += float64(b.Rewards[4*i]) + float64(b.Rewards[4*i+1]) + float64(b.Rewards[4*i+2])
			sumG[i] += float64(b.Rewards[4*i+3])
			if b.Infos[4*i].HasEpisode {
				adv, good = append(adv, sumA[i]), append(good, sumG[i])
				sumA[i], sumG[i] = 0, 0
			}
		}
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	gotA, gotG := log.scalars["team/adversary/return_mean"], log.scalars["team/agent/return_mean"]
	if len(adv) != 4 || len(gotA) != 4 || len(gotG) != 4 {
		t.Fatalf("%d episodes, logged %v and %v", len(adv), gotA, gotG)
	}
	for k := range adv {
		if d := gotA[k] - mean(adv[:k+1]); d*d > 1e-9 {
			t.Errorf("episode %d: adversary return %v, want %v", k, gotA[k], mean(adv[:k+1]))
		}
		if d := gotG[k] - mean(good[:k+1]); d*d > 1e-9 {
			t.Errorf("episode %d: agent return %v, want %v", k, gotG[k], mean(good[:k+1]))
		}
	}
	if mean(adv) == 0 && mean(good) == 0 {
		t.Fatal("no reward at all: the check compares nothing")
	}
	if eps := log.scalars["team/agent/episodes"]; eps[3] != 4 {
		t.Errorf("episodes %v", eps)
	}
	// A cooperative env is left as it is.
	c, err := env.MakeVector("mpe/simple_spread_v3", 3, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if TeamLog(c, log) != c || TeamScalars(env.Maker{}, "mpe/simple_spread_v3") != nil || TeamScalars(env.Maker{}, "CartPole-v1") != nil {
		t.Fatal("a cooperative or single-agent env has team columns")
	}
}

// TestTrainRunTeamColumns: a local run on simple_tag writes each team's
// return to metrics.csv and its last value to summary.json.
func TestTrainRunTeamColumns(t *testing.T) {
	spec := Spec{Name: "script", NewConfig: func() Config { return &scriptConfig{} },
		Train: func(ctx context.Context, rt *Runtime, c Config) (Model, error) {
			envs, err := rt.MakeEnvs(8)
			if err != nil {
				return nil, err
			}
			defer envs.Close()
			if _, err := envs.Reset(1); err != nil {
				return nil, err
			}
			acts := make([]float32, 8)
			for step := int64(8); step <= rt.Header.Steps; step += 8 {
				if _, err := envs.Step(acts); err != nil {
					return nil, err
				}
				rt.Log.Step(step)
			}
			return &scriptModel{w: nn.NewParam("w", 1)}, nil
		}}
	out := filepath.Join(t.TempDir(), "run")
	a, e, steps, every := "script", "mpe/simple_tag_v3?max_cycles=5", int64(400), int64(80)
	res, err := Resolve(nil, []Spec{spec}, Overrides{Algo: &a, Env: &e, Steps: &steps, Out: &out, LogEvery: &every})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := TrainRun(context.Background(), res, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csv, _ := os.ReadFile(filepath.Join(out, MetricsFile))
	header, _, _ := strings.Cut(string(csv), "\n")
	for _, col := range []string{"team/adversary/return_mean", "team/agent/return_mean", "team/agent/episodes"} {
		if !strings.Contains(header, col) {
			t.Errorf("metrics.csv has no %s: %s", col, header)
		}
	}
	if sum.Teams["team/agent/episodes"] != 20 {
		t.Errorf("summary teams %v, want 20 episodes of each team (2 envs × 10)", sum.Teams)
	}
}
