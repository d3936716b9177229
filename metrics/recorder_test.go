package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stripWall drops the wall-clock columns of a metrics.csv.
func stripWall(t *testing.T, data []byte) [][]string {
	t.Helper()
	s, err := DropWallColumns(data)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		out = append(out, strings.Split(line, ","))
	}
	return out
}

func TestRecorderRowsAndFiles(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRecorder(Options{Dir: dir, Algo: "ppo", Env: "CartPole-v1", Seed: 3,
		TotalSteps: 30, LogEvery: 10, Scalars: []string{"losses/a", "charts/b"}})
	if err != nil {
		t.Fatal(err)
	}
	// Steps of 4: rows at 12 (first ≥ 10), 20, and the final 28 on Close.
	r.Episode(2, 10, 10)
	r.Episode(3, 20, 20)
	r.Step(4)
	r.Scalar("losses/a", 0.5)
	r.Step(8)
	r.Step(12)
	r.Episode(14, 30, 30)
	r.Scalar("charts/b", 2)
	r.Step(16)
	r.Step(20)
	r.Step(24)
	r.Step(28)
	s, err := r.Close(true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	got := stripWall(t, data)
	want := [][]string{
		{"step", "episodes", "return_mean_100", "return_std_100", "length_mean_100", "return_recent", "losses/a", "charts/b"},
		{"12", "2", "15", "5", "15", "15", "0.5", ""},
		{"20", "3", "20", "8.16496580927726", "20", "30", "0.5", "2"},
		{"28", "3", "20", "8.16496580927726", "20", "", "0.5", "2"},
	}
	if len(got) != len(want) {
		t.Fatalf("rows:\n%s", data)
	}
	for i := range want {
		if strings.Join(got[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("row %d: %v, want %v", i, got[i], want[i])
		}
	}
	if s.Steps != 28 || s.Episodes != 3 || s.FinalReturnMean100 != 20 || !s.Interrupted || s.Seed != 3 || s.PlannedSteps != 30 {
		t.Fatalf("summary %+v", s)
	}
	back, err := ReadSummary(filepath.Join(dir, "summary.json"))
	if err != nil || back.FinalReturnMean100 != 20 || back.Algo != "ppo" || back.Env != "CartPole-v1" {
		t.Fatalf("summary.json read back %+v, %v", back, err)
	}
	png, err := os.ReadFile(filepath.Join(dir, "curve.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("curve.png: %v (%d bytes)", err, len(png))
	}
	if c := r.Curve(); len(c) != 3 || c[2].Step != 28 || c[2].ReturnMean != 20 {
		t.Fatalf("curve %+v", c)
	}
	if _, err := r.Close(false); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRecorderWindow(t *testing.T) {
	r, err := NewRecorder(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m, _, n := r.ReturnStats(); n != 0 || !math.IsNaN(m) {
		t.Fatalf("empty stats %v %v", m, n)
	}
	for i := range 250 {
		r.Episode(int64(i), float64(i), 1)
	}
	// The last 100 returns are 150..249: mean 199.5.
	if m, _, n := r.ReturnStats(); n != Window || m != 199.5 {
		t.Fatalf("mean %v over %d, want 199.5 over %d", m, n, Window)
	}
	if r.Episodes() != 250 {
		t.Fatalf("episodes %d", r.Episodes())
	}
}

func TestRecorderErrors(t *testing.T) {
	if _, err := NewRecorder(Options{LogEvery: -1, Scalars: []string{"x", "x"}}); !errors.Is(err, ErrOptions) ||
		!strings.Contains(err.Error(), "LogEvery") || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("want both problems, got %v", err)
	}
	r, err := NewRecorder(Options{Scalars: []string{"losses/a"}})
	if err != nil {
		t.Fatal(err)
	}
	r.Scalar("losses/typo", 1)
	if _, err := r.Close(false); !errors.Is(err, ErrUndeclared) || !strings.Contains(err.Error(), "losses/typo") {
		t.Fatalf("want ErrUndeclared naming the scalar, got %v", err)
	}
	if _, err := NewRecorder(Options{Dir: "/proc/nonexistent/dir"}); err == nil {
		t.Fatal("want an error for an unwritable dir")
	}
}

func TestSummaryNoEpisodes(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRecorder(Options{Dir: dir, Algo: "a2c", TotalSteps: 5})
	if err != nil {
		t.Fatal(err)
	}
	r.Step(5)
	if _, err := r.Close(true); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if !strings.Contains(string(b), `"final_return_mean_100": null`) {
		t.Fatalf("NaN must be null in JSON:\n%s", b)
	}
	s, err := ReadSummary(filepath.Join(dir, "summary.json"))
	if err != nil || !math.IsNaN(s.FinalReturnMean100) {
		t.Fatalf("read back %+v %v", s, err)
	}
}

func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	r, err := NewRecorder(Options{Algo: "ppo", Env: "E", TotalSteps: 100, Progress: &out, LineEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Step(10)
	r.Episode(20, 42, 20)
	time.Sleep(time.Millisecond)
	r.Step(50)
	if _, err := r.Close(false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "step 50 (50%)") || !strings.Contains(out.String(), "return_mean_100 42.00") {
		t.Fatalf("progress lines:\n%s", out.String())
	}

	var bar bytes.Buffer
	r, err = NewRecorder(Options{Algo: "ppo", Env: "E", TotalSteps: 100, Progress: &bar, Bar: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Step(100)
	if _, err := r.Close(false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bar.String(), "100%") {
		t.Fatalf("bar output: %q", bar.String())
	}
}

func BenchmarkRecorderStep(b *testing.B) {
	dir := b.TempDir()
	r, err := NewRecorder(Options{Dir: dir, LogEvery: 512, Scalars: []string{"losses/a", "losses/b", "charts/c"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Episode(int64(i), float64(i%500), i%500)
		r.Scalar("losses/a", 1.5)
		r.Scalar("losses/b", 2.5)
		r.Scalar("charts/c", 3.5)
		r.Step(int64(i) * 128)
	}
	b.StopTimer()
	if _, err := r.Close(false); err != nil {
		b.Fatal(err)
	}
}

func TestSummaryEval(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRecorder(Options{Dir: dir, Algo: "ppo", TotalSteps: 5})
	if err != nil {
		t.Fatal(err)
	}
	r.Step(5)
	r.SetEval([]float64{1, 3})
	s, err := r.Close(false)
	if err != nil {
		t.Fatal(err)
	}
	if s.EvalEpisodes != 2 || s.EvalReturnMean != 2 || s.EvalReturnStd != 1 {
		t.Fatalf("summary %+v", s)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if !strings.Contains(string(b), `"eval_return_mean": 2`) || !strings.Contains(string(b), `"eval_episodes": 2`) {
		t.Fatalf("summary.json:\n%s", b)
	}
	// Without an evaluation the return fields are left out.
	dir2 := t.TempDir()
	r2, _ := NewRecorder(Options{Dir: dir2})
	if _, err := r2.Close(false); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(dir2, "summary.json"))
	if strings.Contains(string(b), "eval_return_mean") {
		t.Fatalf("summary.json without eval:\n%s", b)
	}
}

func TestSaveLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lines.png")
	err := SaveLines(path, "t", "x", "y", []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{3, 4}},
		{Name: "p", X: []float64{1.5}, Y: []float64{3.5}, Points: true}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 1000 {
		t.Fatalf("png: %v, %v", st, err)
	}
	if err := SaveLines(path, "t", "x", "y", []Series{{Name: "bad", X: []float64{1}}}); err == nil {
		t.Fatal("mismatched series accepted")
	}
}

// TestSummaryEvalTeams checks a competitive env's evaluation: each team's
// return in eval_teams, and no sum over the teams.
func TestSummaryEvalTeams(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRecorder(Options{Dir: dir, Algo: "ppo", TotalSteps: 5})
	if err != nil {
		t.Fatal(err)
	}
	r.Step(5)
	r.SetEval([]float64{-2, 0})
	r.SetEvalTeams([]string{"adversary", "agent"}, [][]float64{{10, 20}, {-12, -20}})
	s, err := r.Close(false)
	if err != nil {
		t.Fatal(err)
	}
	if s.EvalTeams["adversary"] != (TeamReturn{15, 5}) || s.EvalTeams["agent"] != (TeamReturn{-16, 4}) {
		t.Fatalf("teams %+v", s.EvalTeams)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if strings.Contains(string(b), "eval_return_mean") || !strings.Contains(string(b), `"adversary": {`) || !strings.Contains(string(b), `"eval_episodes": 2`) {
		t.Fatalf("summary.json:\n%s", b)
	}
}

// TestSummaryPolicyLagMax: the last charts/policy_lag_max goes to
// summary.json's policy_lag_max; a run without it leaves the key out.
func TestSummaryPolicyLagMax(t *testing.T) {
	for _, lag := range []float64{7, -1} {
		dir := t.TempDir()
		opt := Options{Dir: dir, Algo: "impala", TotalSteps: 5}
		if lag >= 0 {
			opt.Scalars = []string{"charts/policy_lag", "charts/policy_lag_max"}
		}
		r, err := NewRecorder(opt)
		if err != nil {
			t.Fatal(err)
		}
		if lag >= 0 {
			r.Scalar("charts/policy_lag", 2)
			r.Scalar("charts/policy_lag_max", lag)
		}
		r.Step(5)
		if _, err := r.Close(false); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
		if got := strings.Contains(string(b), fmt.Sprintf(`"policy_lag_max": %v`, lag)); got != (lag >= 0) || (lag < 0 && strings.Contains(string(b), "policy_lag_max")) {
			t.Errorf("lag %v: summary.json:\n%s", lag, b)
		}
	}
}

// TestSummaryMachine: Options.Machine reaches summary.json as "machine";
// without it the key is left out.
func TestSummaryMachine(t *testing.T) {
	for _, m := range []*Machine{{OS: "linux", Arch: "amd64", CPUs: 2, Kernels: "avx2-fma"}, nil} {
		dir := t.TempDir()
		r, err := NewRecorder(Options{Dir: dir, Algo: "ppo", TotalSteps: 5, Machine: m})
		if err != nil {
			t.Fatal(err)
		}
		r.Step(5)
		if _, err := r.Close(false); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
		var got struct {
			Machine *Machine `json:"machine"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Machine) != fmt.Sprint(m) {
			t.Errorf("machine %+v in summary.json, want %+v:\n%s", got.Machine, m, b)
		}
	}
}
