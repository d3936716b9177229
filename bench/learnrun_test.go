package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchLearn(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a2c.yaml")
	if err := os.WriteFile(cfg, []byte("algo: a2c\nenv: CartPole-v1\nsteps: 100000\na2c:\n  num_envs: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	rows, err := BenchLearn(context.Background(), []string{cfg}, []uint64{1, 2},
		LearnOptions{Steps: 400, Out: filepath.Join(dir, "runs"), Progress: &progress, EvalEpisodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Seed != 1 || rows[1].Seed != 2 || rows[0].Steps != 400 || rows[0].Algo != "a2c" ||
		rows[0].EvalEpisodes != 2 || !(rows[0].EvalReturnMean > 0) {
		t.Fatalf("rows %+v", rows)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", "a2c-CartPole-v1-2", "summary.json")); err != nil {
		t.Fatalf("run directory: %v", err)
	}
	if strings.Count(progress.String(), "\n") != 2 {
		t.Fatalf("progress: %q", progress.String())
	}
	var md bytes.Buffer
	if err := WriteLearnMarkdown(&md, rows, math.NaN()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### A2C on CartPole-v1", "| 1 |", "| 2 |", "**mean**", "greedy eval (2 episodes)", ", 0 of 2 (greedy evaluation).", "Target ≥ 475: reached by 0 of 2 seeds (training episodes)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	md.Reset()
	rows[0].FinalReturnMean100 = 10
	if err := WriteLearnMarkdown(&md, rows, 5); err != nil || !strings.Contains(md.String(), "Target ≥ 5: reached by 1 of 2") &&
		!strings.Contains(md.String(), "Target ≥ 5: reached by 2 of 2") {
		t.Fatalf("explicit target: %v\n%s", err, md.String())
	}

	if _, err := BenchLearn(context.Background(), nil, []uint64{1}, LearnOptions{}); err == nil {
		t.Fatal("want an error with no config")
	}
	if _, err := BenchLearn(context.Background(), []string{filepath.Join(dir, "missing.yaml")}, []uint64{1}, LearnOptions{}); err == nil {
		t.Fatal("want an error for a missing file")
	}
}
