package algo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"herd/env"
	"herd/metrics"
	"herd/nn"
)

// scriptModel is a one-parameter model; its value is the step at which
// Train last wrote it, so a checkpoint tells which step it holds.
type scriptModel struct{ w *nn.Param }

func (m *scriptModel) Act(dst, _ []float32) []float32 { dst[0] = 0; return dst[:1] }
func (m *scriptModel) Save(path string) error {
	return nn.SaveFile(path, []*nn.Param{m.w}, map[string]string{"format": "script"})
}
func (m *scriptModel) Params() []*nn.Param { return []*nn.Param{m.w} }

type scriptConfig struct {
	// BadAt is the step at which Train poisons the run; What says how:
	// "loss" (NaN loss and NaN weight), "param" (NaN weight only), "grad".
	BadAt int64  `yaml:"bad_at"`
	What  string `yaml:"what"`
	// NoParams hides Params (a model the guard cannot roll back).
	NoParams bool `yaml:"no_params"`
}

func (c *scriptConfig) Validate(Header) error { return nil }

type opaqueModel struct{ m *scriptModel }

func (o opaqueModel) Act(dst, obs []float32) []float32 { return o.m.Act(dst, obs) }
func (o opaqueModel) Save(path string) error           { return o.m.Save(path) }

func scriptSpec() Spec {
	return Spec{
		Name:      "script",
		Scalars:   []string{"losses/x", "losses/explained_variance"},
		NewConfig: func() Config { return &scriptConfig{} },
		Train: func(ctx context.Context, rt *Runtime, c Config) (Model, error) {
			cfg := c.(*scriptConfig)
			if cfg.What == "fail" { // an error already prefixed with the algorithm's name
				return nil, errors.New("script: env: boom")
			}
			m := &scriptModel{w: nn.NewParam("w", 1)}
			var model Model = m
			if cfg.NoParams {
				model = opaqueModel{m}
			}
			rt.Track(model)
			for step := int64(100); step <= rt.Header.Steps; step += 100 {
				if ctx.Err() != nil {
					return model, ctx.Err()
				}
				m.w.Value[0] = float32(step)
				loss := 1.0
				if cfg.BadAt > 0 && step >= cfg.BadAt {
					switch cfg.What {
					case "loss":
						m.w.Value[0], loss = float32(math.NaN()), math.NaN()
					case "param":
						m.w.Value[0] = float32(math.Inf(1))
					case "grad":
						m.w.Grad[0] = float32(math.NaN())
					}
				}
				rt.Log.Scalar("losses/x", loss)
				rt.Log.Scalar("losses/explained_variance", math.NaN()) // undefined, not divergence
				rt.Log.Step(step)
			}
			return model, nil
		},
	}
}

func scriptRun(t *testing.T, out string, set ...string) *Resolved {
	t.Helper()
	a, e, steps := "script", "CartPole-v1", int64(5000)
	res, err := Resolve(nil, []Spec{scriptSpec()}, Overrides{Algo: &a, Env: &e, Steps: &steps, Out: &out, Set: set})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readWeights(t *testing.T, path string) (float32, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ck, err := nn.ReadSafetensors(f)
	if err != nil {
		t.Fatal(err)
	}
	return ck.Tensors["w"].Data[0], ck.Metadata
}

func TestTrainRunCompletes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	sum, err := TrainRun(context.Background(), scriptRun(t, out), RunOptions{})
	if err != nil || sum.Status != metrics.StatusCompleted {
		t.Fatalf("err %v, status %q", err, sum.Status)
	}
	for _, f := range RunFiles() {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(out, stagingDir)); !os.IsNotExist(err) {
		t.Errorf("staging directory left behind: %v", err)
	}
	w, md := readWeights(t, filepath.Join(out, ModelFile))
	if w != 5000 || md[MetaAlgo] != "script" || md[MetaEnv] != "CartPole-v1" || md["format"] != "script" ||
		!strings.HasPrefix(md[MetaObsSpace], "Box(") || md[MetaActSpace] != "Discrete(2, start=0)" {
		t.Fatalf("weight %v, metadata %v", w, md)
	}
	csv, _ := os.ReadFile(filepath.Join(out, MetricsFile))
	// A NaN that an algorithm logs is written as NaN (here: explained
	// variance, undefined without variance, which does not stop the run).
	if !strings.Contains(string(csv), ",1,NaN\n") {
		t.Errorf("want the NaN explained variance written as NaN:\n%s", csv)
	}
}

func TestTrainRunStopsAtDivergence(t *testing.T) {
	for _, tc := range []struct {
		what, quantity string
		step, kept     int64
		weight         float32
	}{
		{"loss", "losses/x", 2500, 2000, 2000},     // loss seen at once; weights of the last row
		{"param", "parameter w", 3000, 2000, 2000}, // parameters checked at each row
		{"grad", "gradient of w", 3000, 2000, 2000},
	} {
		t.Run(tc.what, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			sum, err := TrainRun(context.Background(), scriptRun(t, out, "bad_at=2500", "what="+tc.what), RunOptions{})
			var de *DivergedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDiverged) || errors.Is(err, context.Canceled) {
				t.Fatalf("err %v: want a *DivergedError, not a cancellation", err)
			}
			if de.Step != tc.step || de.Quantity != tc.quantity || de.KeptStep != tc.kept {
				t.Fatalf("diverged at %d on %q keeping %d; want %d, %q, %d", de.Step, de.Quantity, de.KeptStep, tc.step, tc.quantity, tc.kept)
			}
			if !strings.Contains(err.Error(), tc.quantity) {
				t.Errorf("error %q does not name %s", err, tc.quantity)
			}
			s, rerr := metrics.ReadSummary(filepath.Join(out, SummaryFile))
			if rerr != nil || s.Status != metrics.StatusDiverged || sum.Status != metrics.StatusDiverged || !strings.Contains(s.Reason, tc.quantity) {
				t.Fatalf("summary %+v (%v)", s, rerr)
			}
			if w, _ := readWeights(t, filepath.Join(out, ModelFile)); w != tc.weight {
				t.Fatalf("saved weight %v, want the last finite one %v", w, tc.weight)
			}
			if tc.what == "loss" {
				csv, _ := os.ReadFile(filepath.Join(out, MetricsFile))
				if !strings.Contains(string(csv), ",NaN,") {
					t.Errorf("the NaN loss is not written as NaN:\n%s", csv)
				}
			}
		})
	}
}

// A model that hides its parameters cannot be rolled back: its NaN weights
// are refused, the run fails and says so.
func TestTrainRunDivergedWithoutParams(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	_, err := TrainRun(context.Background(), scriptRun(t, out, "bad_at=2500", "what=loss", "no_params=true"), RunOptions{})
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "not everything was saved") {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, ModelFile)); !os.IsNotExist(err) {
		t.Fatalf("a non-finite model was written: %v", err)
	}
}

func TestTrainRunInterrupted(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sum, err := TrainRun(ctx, scriptRun(t, out), RunOptions{})
	if !errors.Is(err, context.Canceled) || sum.Status != metrics.StatusInterrupted {
		t.Fatalf("err %v, status %q", err, sum.Status)
	}
	// The same with a model that cannot be saved: a failure, not a clean
	// interruption.
	res := scriptRun(t, filepath.Join(t.TempDir(), "run"))
	train := res.Spec.Train
	res.Spec.Train = func(ctx context.Context, rt *Runtime, c Config) (Model, error) {
		m, err := train(ctx, rt, c)
		return failSaveModel{m.(*scriptModel)}, err
	}
	_, err = TrainRun(ctx, res, RunOptions{})
	if err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not everything was saved") {
		t.Fatalf("err %v: want a failure that is not a cancellation", err)
	}
}

func TestRunDirectoryRules(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, err := TrainRun(context.Background(), scriptRun(t, out), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(out, ModelFile))
	if _, err := TrainRun(context.Background(), scriptRun(t, out), RunOptions{}); !errors.Is(err, ErrRunExists) {
		t.Fatalf("second run into %s: %v, want ErrRunExists", out, err)
	}
	if _, err := TrainRun(context.Background(), scriptRun(t, out), RunOptions{Dir: DirResume}); !errors.Is(err, ErrCannotResume) ||
		!strings.Contains(err.Error(), "script (executor local) saves no training state") {
		t.Fatalf("resume: %v, want ErrCannotResume naming the algorithm and the executor", err)
	}
	// A forced run that fails before training leaves the old run whole.
	res := scriptRun(t, out)
	res.Spec.Train = func(context.Context, *Runtime, Config) (Model, error) { return nil, errors.New("no such space") }
	if _, err := TrainRun(context.Background(), res, RunOptions{Dir: DirForce}); err == nil {
		t.Fatal("want the Train error")
	}
	after, _ := os.ReadFile(filepath.Join(out, ModelFile))
	if string(after) != string(before) {
		t.Fatal("a failed forced run changed the earlier run's model")
	}
	// A run into a fresh directory that fails leaves no directory.
	fresh := filepath.Join(t.TempDir(), "fresh")
	res.Header.Out = fresh
	if _, err := TrainRun(context.Background(), res, RunOptions{}); err == nil {
		t.Fatal("want the Train error")
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("failed run left %s behind: %v", fresh, err)
	}
	// One writer at a time.
	d, err := openRunDir(out, DirForce, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openRunDir(out, DirForce, nil); !errors.Is(err, ErrRunLocked) {
		t.Fatalf("second writer: %v, want ErrRunLocked", err)
	}
	d.abort()
	d.close()
	if d, err = openRunDir(out, DirForce, nil); err != nil {
		t.Fatalf("after release: %v", err)
	}
	d.close()
}

func TestCheckCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ModelFile)
	m := &scriptModel{w: nn.NewParam("w", 1)}
	e, _ := env.Make("CartPole-v1")
	h := Header{Algo: "script", Env: "CartPole-v1"}
	if err := saveCheckpoint(m, path, checkpointMeta(h, e.ObservationSpace(), e.ActionSpace())); err != nil {
		t.Fatal(err)
	}
	if note, err := CheckCheckpoint(path, h, false); err != nil || note != "" {
		t.Fatalf("same run: %q %v", note, err)
	}
	for _, tc := range []struct {
		h        Header
		override bool
		want     string
	}{
		{Header{Algo: "ppo", Env: "CartPole-v1"}, false, "trained by script"},
		{Header{Algo: "script", Env: "CartPole-v0"}, false, "trained on CartPole-v1, not CartPole-v0"},
		{Header{Algo: "script", Env: "Acrobot-v1"}, true, "Acrobot-v1 has"},
	} {
		if _, err := CheckCheckpoint(path, tc.h, tc.override); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v override %v: %v, want %q", tc.h, tc.override, err, tc.want)
		}
	}
	if note, err := CheckCheckpoint(path, Header{Algo: "script", Env: "CartPole-v0"}, true); err != nil || !strings.Contains(note, "spaces match") {
		t.Errorf("compatible override: %q %v", note, err)
	}
	m.w.Value[0] = float32(math.NaN())
	if err := saveCheckpoint(m, path, nil); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("NaN weights saved: %v", err)
	}
}

func TestMemoryEstimate(t *testing.T) {
	e, _ := env.Make("CartPole-v1")
	obs, act := e.ObservationSpace(), e.ActionSpace()
	h := Header{Steps: 1000, LogEvery: 1000}
	small := &testCfg{NumEnvs: 1, BufferSize: 10000, BatchSize: 128, NetArch: []int{120, 84}}
	uses := EstimateMemory(h, small, obs, act, 1024, nil)
	var total float64
	for _, u := range uses {
		total += u.Bytes
	}
	// 10k rows of 2×4 obs + 1 action + 4 scalars, float32: 520 kB, plus little else.
	if total < 520e3 || total > 2e6 {
		t.Fatalf("estimate %v B for a CartPole DQN; uses %+v", total, uses)
	}
	if err := checkMemory(uses); err != nil {
		t.Fatal(err)
	}
	big := &testCfg{NumEnvs: 1, BufferSize: 1e12, BatchSize: 128}
	if err := checkMemory(EstimateMemory(h, big, obs, act, 1024, nil)); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "buffer_size=1000000000000") {
		t.Fatalf("buffer_size=1e12: %v", err)
	}
	many := &testCfg{NumEnvs: 1e9, BatchSize: 1}
	if err := checkMemory(EstimateMemory(h, many, obs, act, 1024, nil)); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "num_envs=1000000000") {
		t.Fatalf("num_envs=1e9: %v", err)
	}
	// An executor's workers beyond the first each add their envs and policy copy.
	actors := []WorkerSet{{Key: "actors", N: 1e7, Envs: true, Policy: true}}
	if err := checkMemory(EstimateMemory(h, small, obs, act, 1024, actors)); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "runtime.actors=10000000") {
		t.Fatalf("10M actors: %v", err)
	}
}

type testCfg struct {
	NumEnvs    int   `yaml:"num_envs"`
	BufferSize int   `yaml:"buffer_size"`
	BatchSize  int   `yaml:"batch_size"`
	NetArch    []int `yaml:"net_arch"`
}

func (*testCfg) Validate(Header) error { return nil }

// TestTrainRunOnePrefix: an algorithm's error that already names the
// algorithm is not prefixed with its name again ("algo: sac: sac: …").
func TestTrainRunOnePrefix(t *testing.T) {
	_, err := TrainRun(context.Background(), scriptRun(t, filepath.Join(t.TempDir(), "run"), "what=fail"), RunOptions{})
	if err == nil || err.Error() != "algo: script: env: boom" {
		t.Fatalf("err %q, want %q", err, "algo: script: env: boom")
	}
}

// failSaveModel is a model whose checkpoint cannot be written, as on a
// full disk.
type failSaveModel struct{ *scriptModel }

func (m failSaveModel) Save(string) error {
	return fmt.Errorf("write model: %w", syscall.ENOSPC)
}

func snapshotRun(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range RunFiles() {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

// A forced run that trains but cannot save everything leaves the earlier
// run byte-identical, and says where its own partial files are.
func TestForcedRunThatFailsKeepsEarlierRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, err := TrainRun(context.Background(), scriptRun(t, out), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	before := snapshotRun(t, out)
	res := scriptRun(t, out)
	train := res.Spec.Train
	res.Spec.Train = func(ctx context.Context, rt *Runtime, c Config) (Model, error) {
		m, err := train(ctx, rt, c)
		return failSaveModel{m.(*scriptModel)}, err
	}
	_, err := TrainRun(context.Background(), res, RunOptions{Dir: DirForce})
	if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "earlier run in "+out+" is unchanged") {
		t.Fatalf("err %v", err)
	}
	if after := snapshotRun(t, out); !maps.Equal(before, after) {
		t.Fatal("a failed forced run changed the earlier run")
	}
	if _, err := os.Stat(filepath.Join(out, previousDir)); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", previousDir, err)
	}
	// The next forced run that succeeds replaces it.
	if _, err := TrainRun(context.Background(), scriptRun(t, out, "bad_at=0"), RunOptions{Dir: DirForce}); err != nil {
		t.Fatal(err)
	}
}

// A process killed in the middle of a commit leaves either the earlier run
// or the new one, whole, for the next open.
func TestRunDirRecoversInterruptedCommit(t *testing.T) {
	for _, state := range []string{"setting-aside", "moving", "moved"} {
		t.Run(state, func(t *testing.T) {
			dir := t.TempDir()
			prev, stage := filepath.Join(dir, previousDir), filepath.Join(dir, stagingDir)
			for _, d := range []string{prev, stage} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write := func(d, f, s string) {
				if err := os.WriteFile(filepath.Join(d, f), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := "old"
			switch state {
			case "setting-aside": // model set aside, summary not yet
				write(prev, ModelFile, "old")
				write(dir, SummaryFile, "old")
				write(stage, ModelFile, "new")
				write(stage, SummaryFile, "new")
			case "moving": // all set aside, model moved, summary not yet
				write(prev, setAsideMark, "")
				write(prev, ModelFile, "old")
				write(prev, SummaryFile, "old")
				write(dir, ModelFile, "new")
				write(stage, SummaryFile, "new")
			case "moved":
				write(prev, setAsideMark, "")
				write(prev, ModelFile, "old")
				write(prev, SummaryFile, "old")
				write(dir, ModelFile, "new")
				write(dir, SummaryFile, "new")
				want = "new"
			}
			d, err := openRunDir(dir, DirForce, nil)
			if err != nil {
				t.Fatal(err)
			}
			d.abort()
			d.close()
			for _, f := range []string{ModelFile, SummaryFile} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != want {
					t.Errorf("%s: %q (%v), want %q", f, b, err, want)
				}
			}
			if _, err := os.Stat(prev); !os.IsNotExist(err) {
				t.Errorf("%s left behind", previousDir)
			}
		})
	}
}

// A default run directory never collides: a second run moves on to the
// next free numbered directory, while a directory named on purpose that
// holds a run is still refused.
func TestDefaultRunDirNeverCollides(t *testing.T) {
	t.Chdir(t.TempDir())
	a, e, steps := "script", "CartPole-v1", int64(500)
	resolve := func(out *string) *Resolved {
		res, err := Resolve(nil, []Spec{scriptSpec()}, Overrides{Algo: &a, Env: &e, Steps: &steps, Out: out})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	base := filepath.Join("runs", "script-CartPole-v1-1")
	for i, want := range []string{base, base + "-2", base + "-3"} {
		res := resolve(nil)
		if !res.OutIsDefault() || res.Header.Out != base {
			t.Fatalf("run %d: Out %q default %v, want the default %q", i, res.Header.Out, res.OutIsDefault(), base)
		}
		if _, err := TrainRun(context.Background(), res, RunOptions{}); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if res.Header.Out != want {
			t.Fatalf("run %d wrote %q, want %q", i, res.Header.Out, want)
		}
		cfg, err := os.ReadFile(filepath.Join(want, ConfigFile))
		if err != nil || !strings.Contains(string(cfg), "out: "+want+"\n") {
			t.Fatalf("run %d: config.yaml %q (%v) does not name %s", i, cfg, err, want)
		}
	}
	if got := FreeRunDir(base); got != base+"-4" {
		t.Fatalf("FreeRunDir = %q, want %q", got, base+"-4")
	}
	explicit := base
	res := resolve(&explicit)
	if res.OutIsDefault() {
		t.Fatal("an --out given on purpose counts as the default")
	}
	if _, err := TrainRun(context.Background(), res, RunOptions{}); !errors.Is(err, ErrRunExists) {
		t.Fatalf("explicit --out holding a run: %v, want ErrRunExists", err)
	}
	// --force replaces the default directory itself rather than moving on.
	res = resolve(nil)
	if _, err := TrainRun(context.Background(), res, RunOptions{Dir: DirForce}); err != nil || res.Header.Out != base {
		t.Fatalf("forced default run: %v into %q, want %q", err, res.Header.Out, base)
	}
}

type shapedConfig struct{ scriptConfig }

func (shapedConfig) RolloutShape() (int, int, float32) { return 4, 128, 0.99 }

func TestStepsRunRoundsToWholeRollouts(t *testing.T) {
	res := &Resolved{Header: Header{Steps: 20000}, Config: &shapedConfig{}}
	if steps, unit := res.StepsRun(); steps != 19968 || unit != 512 {
		t.Fatalf("StepsRun = %d, %d; want 19968 (39 × 512), 512", steps, unit)
	}
	res.Config = &scriptConfig{}
	if steps, unit := res.StepsRun(); steps != 20000 || unit != 1 {
		t.Fatalf("StepsRun without rollouts = %d, %d; want 20000, 1", steps, unit)
	}
}

// TestTrainRunTeams checks that the evaluation of a competitive env
// (simple_tag: adversaries and a good agent) is reported per team in
// summary.json, without the meaningless sum over teams, and that a
// cooperative env keeps its team return.
func TestTrainRunTeams(t *testing.T) {
	for _, c := range []struct {
		id          string
		competitive bool
	}{{"mpe/simple_tag_v3", true}, {"mpe/simple_spread_v3", false}} {
		out := filepath.Join(t.TempDir(), "run")
		a, e, steps := "script", c.id, int64(200)
		res, err := Resolve(nil, []Spec{scriptSpec()}, Overrides{Algo: &a, Env: &e, Steps: &steps, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := TrainRun(context.Background(), res, RunOptions{EvalEpisodes: 2})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(out, SummaryFile))
		ar, err := EvaluateAgents(context.Background(), constPolicy{0}, env.Maker{}, c.id, 2, res.Header.Seed)
		if err != nil {
			t.Fatal(err)
		}
		if !c.competitive {
			if sum.EvalTeams != nil || !strings.Contains(string(b), `"eval_return_mean"`) || sum.EvalReturnMean != (ar.Team[0]+ar.Team[1])/2 {
				t.Fatalf("%s: cooperative summary %+v:\n%s", c.id, sum, b)
			}
			continue
		}
		if strings.Contains(string(b), `"eval_return_mean"`) || !strings.Contains(string(b), `"eval_teams"`) {
			t.Fatalf("%s: want eval_teams and no summed eval_return_mean:\n%s", c.id, b)
		}
		for i, n := range ar.TeamNames {
			col := ar.TeamColumn(i)
			if got := sum.EvalTeams[n].ReturnMean; got != (col[0]+col[1])/2 {
				t.Errorf("%s: team %s return %v, want %v", c.id, n, got, (col[0]+col[1])/2)
			}
		}
		if len(sum.EvalTeams) != 2 {
			t.Fatalf("%s: teams %v", c.id, sum.EvalTeams)
		}
	}
}

// TestFailedRunLeavesNoDirs: a run that fails before it has anything to
// save, or whose directory is refused, removes every directory it created
// (the run's and parents such as runs/), and only those.
func TestFailedRunLeavesNoDirs(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "runs", "deep", "run")
	if _, err := TrainRun(context.Background(), scriptRun(t, out, "what=fail"), RunOptions{}); err == nil {
		t.Fatal("the failing run succeeded")
	}
	if _, err := os.Stat(filepath.Join(base, "runs")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed run left %s behind (%v)", filepath.Join(base, "runs"), err)
	}
	if _, err := TrainRun(context.Background(), scriptRun(t, out), RunOptions{Dir: DirResume}); !errors.Is(err, ErrCannotResume) {
		t.Fatalf("resume of nothing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "runs")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused resume left %s behind (%v)", filepath.Join(base, "runs"), err)
	}
	// A parent that existed, or holds something else, stays.
	keep := filepath.Join(base, "runs", "other")
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := TrainRun(context.Background(), scriptRun(t, out, "what=fail"), RunOptions{}); err == nil {
		t.Fatal("the failing run succeeded")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("%s removed: %v", keep, err)
	}
	if _, err := os.Stat(filepath.Join(base, "runs", "deep")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("runs/deep left behind (%v)", err)
	}
}

// resumableRun is scriptRun with a Train that checkpoints: the state is
// the step, saved every checkpoint_every steps and when cancelled, and a
// resumed Train starts after the restored step.
func resumableRun(t *testing.T, out string, set ...string) *Resolved {
	t.Helper()
	res := scriptRun(t, out, set...)
	res.Header.CheckpointEvery = 1000
	res.Spec.Resumable = true
	res.Spec.Train = func(ctx context.Context, rt *Runtime, c Config) (Model, error) {
		m := &scriptModel{w: nn.NewParam("w", 1)}
		ck := rt.Checkpoints
		first := int64(100)
		if st := ck.Restored(); st != nil {
			first = st.Header.Step + 100
			m.w.Value[0] = float32(st.Header.Step)
		}
		save := func(step int64) error { return ck.Save(step, map[string][]byte{"w": {1}}) }
		for step := first; step <= rt.Header.Steps; step += 100 {
			if ctx.Err() != nil {
				save(step - 100)
				return m, ctx.Err()
			}
			m.w.Value[0] = float32(step)
			rt.Log.Scalar("losses/x", 1)
			rt.Log.Step(step)
			if ck.Due(step) {
				if err := save(step); err != nil {
					return m, err
				}
			}
		}
		return m, save(rt.Header.Steps)
	}
	return res
}

// TestResumeDirRules: a resumable run keeps its newest checkpoint_keep
// checkpoints in OUT/checkpoints; a directory holding only checkpoints (a
// killed run) counts as a run; a resume with another configuration is
// refused naming the key and changes nothing; a resume continues from the
// newest checkpoint that loads (a damaged newer one named and set aside),
// its metrics.csv without repeated or missing rows, and summary.json
// records the step.
func TestResumeDirRules(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	res := resumableRun(t, out)
	res.Header.CheckpointKeep = 2
	var saved []int64
	_, err := TrainRun(ctx, res, RunOptions{Checkpointed: func(c CheckpointInfo) {
		saved = append(saved, c.Step)
		if c.Step == 3000 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || !slices.Equal(saved, []int64{1000, 2000, 3000, 3000}) {
		t.Fatalf("interrupted run: %v, checkpoints at %v", err, saved)
	}
	ents, _ := os.ReadDir(filepath.Join(out, CheckpointDir))
	if len(ents) != 2 {
		t.Fatalf("checkpoint_keep 2 kept %d files", len(ents))
	}
	// Only checkpoints left (the run's files lost): still a run.
	for _, f := range RunFiles() {
		os.Remove(filepath.Join(out, f))
	}
	if _, err := TrainRun(context.Background(), resumableRun(t, out), RunOptions{}); !errors.Is(err, ErrRunExists) {
		t.Fatalf("a new run into a directory of checkpoints: %v, want ErrRunExists", err)
	}
	if FreeRunDir(out) == out {
		t.Fatal("FreeRunDir took a directory holding checkpoints")
	}
	before, _ := os.ReadDir(filepath.Join(out, CheckpointDir))
	_, err = TrainRun(context.Background(), resumableRun(t, out, "bad_at=7"), RunOptions{Dir: DirResume})
	if !errors.Is(err, ErrCannotResume) || !strings.Contains(err.Error(), "script.bad_at 0 (this run: 7)") {
		t.Fatalf("resume with another setting: %v", err)
	}
	after, _ := os.ReadDir(filepath.Join(out, CheckpointDir))
	if len(after) != len(before) || after[len(after)-1].Name() != before[len(before)-1].Name() {
		t.Fatal("a refused resume changed the checkpoints")
	}
	short := resumableRun(t, out)
	short.Header.Steps = 1000
	if _, err := TrainRun(context.Background(), short, RunOptions{Dir: DirResume}); !errors.Is(err, ErrCannotResume) ||
		!strings.Contains(err.Error(), "past this run's 1000 steps") {
		t.Fatalf("resume with a budget below the checkpoint: %v", err)
	}
	// The newest checkpoint damaged (a crash of the disk, not of herd):
	// the one before it is used, and the damaged one set aside.
	newest := filepath.Join(out, CheckpointDir, before[len(before)-1].Name())
	if err := os.Truncate(newest, 100); err != nil {
		t.Fatal(err)
	}
	var from int64 = -1
	var skipped []string
	sum, err := TrainRun(context.Background(), resumableRun(t, out), RunOptions{Dir: DirResume,
		Resumed: func(step int64, _ string, s []string) { from, skipped = step, s }})
	if err != nil || from != 2000 || sum.ResumedFromStep == nil || *sum.ResumedFromStep != 2000 || sum.Steps != 5000 {
		t.Fatalf("resume: %v, from %d, summary %+v", err, from, sum)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], newest) {
		t.Fatalf("skipped %v", skipped)
	}
	if _, err := os.Stat(newest + ".damaged"); err != nil {
		t.Fatalf("the damaged checkpoint was not set aside: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(out, MetricsFile))
	var steps []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		steps = append(steps, strings.Split(line, ",")[0])
	}
	if !slices.Equal(steps, []string{"1000", "2000", "3000", "4000", "5000"}) {
		t.Fatalf("metrics.csv rows at %v", steps)
	}
}

// TestCheckpointsNote: summary.json says whether the run wrote
// checkpoints, and why not: on for a resumable run, off with the
// algorithm's own reason (Checkpoints.Disable), off naming the algorithm
// for one that cannot resume.
func TestCheckpointsNote(t *testing.T) {
	disabled := func(t *testing.T, out string) *Resolved {
		res := resumableRun(t, out)
		train := res.Spec.Train
		res.Spec.Train = func(ctx context.Context, rt *Runtime, c Config) (Model, error) {
			rt.Checkpoints.Disable("env x cannot save its state")
			return train(ctx, rt, c)
		}
		return res
	}
	plain := func(t *testing.T, out string) *Resolved { return scriptRun(t, out) }
	for _, c := range []struct {
		name string
		run  func(*testing.T, string) *Resolved
		want string
	}{
		{"on", func(t *testing.T, out string) *Resolved { return resumableRun(t, out) }, `"checkpoints": "on"`},
		{"disabled", disabled, `"checkpoints": "off: env x cannot save its state"`},
		{"not resumable", plain, `saves no training state to continue from yet`},
	} {
		out := filepath.Join(t.TempDir(), "run")
		if _, err := TrainRun(context.Background(), c.run(t, out), RunOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "summary.json"))
		if err != nil || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: summary.json lacks %s (%v):\n%s", c.name, c.want, err, b)
		}
	}
}

// TestMultiAgentResumableUnder: a run with a multiagent section writes
// checkpoints under the local executor when every policy's algorithm
// does; under another executor, or with a policy of an algorithm that
// saves no training state, it does not, and the reason names which.
func TestMultiAgentResumableUnder(t *testing.T) {
	ma := MultiAgentConfig{Policies: []string{"a", "b"}, PolicyMapping: map[string]string{"x": "a", "y": "b"}, Algos: map[string]string{"b": "other"}}
	run := func(otherResumable bool) *Resolved {
		return &Resolved{Header: Header{Algo: "main", MultiAgent: ma}, Spec: Spec{Name: "main", Resumable: true},
			Others: map[string]AlgoConfig{"other": {Spec: Spec{Name: "other", Resumable: otherResumable}}}}
	}
	local, hts := Executor{Name: LocalExecutor}, Executor{Name: "hts", Resumable: true}
	if !resumableUnder(run(true), local) {
		t.Errorf("local executor, every algorithm resumable: not resumable (%s)", notResumable(run(true), local, false))
	}
	for _, c := range []struct {
		name string
		res  *Resolved
		ex   Executor
		want string
	}{
		{"hts", run(true), hts, "main with a multiagent section under executor hts saves no training state to continue from yet; only the local executor"},
		{"other algorithm", run(false), local, "other, which trains a policy of the multiagent section (executor local), saves no training state to continue from yet"},
	} {
		if resumableUnder(c.res, c.ex) {
			t.Errorf("%s: resumable", c.name)
		}
		if got := notResumable(c.res, c.ex, false); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
