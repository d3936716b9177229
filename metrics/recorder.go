package metrics

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"herd/internal/atomicfile"
	"herd/metrics/tfevents"
)

// Errors returned by a Recorder.
var (
	// ErrOptions marks invalid Options.
	ErrOptions = errors.New("metrics: invalid options")
	// ErrUndeclared is reported by Close when the algorithm passed a scalar
	// name that was not in Options.Scalars (it has no metrics.csv column).
	ErrUndeclared = errors.New("metrics: undeclared scalar")
)

// EventsFile is the TensorBoard event file a Recorder writes into Dir. Its
// fixed name (TensorBoard only needs "tfevents" in it) lets a run directory
// list it among its files.
const EventsFile = "events.out.tfevents.herd"

// Window is the number of most recent episodes the return statistics cover
// (return_mean_100 and summary.json's final_return_mean_100).
const Window = 100

// Fixed leading columns of metrics.csv. wall_seconds and sps are the only
// columns that depend on the clock: everything else is a function of the run
// seed, which the determinism tests rely on.
func baseColumns() []string {
	return []string{"step", "wall_seconds", "sps", "episodes",
		"return_mean_100", "return_std_100", "length_mean_100", "return_recent"}
}

// BaseTags are the TensorBoard tags of the leading metrics.csv columns
// (step and wall_seconds are the event's own step and time), in the order
// writeRow fills them; the declared scalars follow.
func BaseTags() []string {
	return []string{"charts/sps", "charts/episodes", "charts/return_mean_100", "charts/return_std_100",
		"charts/length_mean_100", "charts/return_recent"}
}

// WallColumns names the metrics.csv columns that depend on the wall clock.
func WallColumns() []string { return []string{"wall_seconds", "sps"} }

// RowSink receives a run's rows as the Recorder writes them: Start once
// with the run's header and the tags of the row's values (BaseTags, then
// the declared scalars), then Row at every metrics.csv row with those
// values (NaN: no value yet), which it must copy to keep. metrics/prom's
// Live is one, for a Prometheus endpoint.
type RowSink interface {
	Start(algo, env string, seed uint64, tags []string)
	Row(step, episodes int64, vals []float64)
}

// Options configures a Recorder. The zero value records in memory only.
type Options struct {
	// Dir is the run directory for metrics.csv, summary.json and curve.png;
	// "" writes no files. Created if missing.
	Dir string
	// Algo, Env and Seed are copied into summary.json.
	Algo, Env string
	Seed      uint64
	// TotalSteps is the planned number of steps (progress bar length, and
	// summary.json's planned_steps).
	TotalSteps int64
	// LogEvery is the metrics.csv row interval in steps. Default 1000.
	LogEvery int64
	// Scalars are the names of the extra columns, in order.
	Scalars []string
	// Progress receives progress output; nil prints nothing.
	Progress io.Writer
	// Bar draws a progress bar (for a terminal) instead of plain log lines.
	Bar bool
	// LineEvery is the minimum time between plain progress lines.
	// Default 5 s.
	LineEvery time.Duration
	// Live, when set, receives every row for a Prometheus endpoint
	// (metrics/prom's Live and Serve).
	Live RowSink
	// Machine, when set, is copied into summary.json.
	Machine *Machine
	// Resume, when set, is the state of an earlier Recorder of the same
	// run (MarshalState): the new one continues it, its metrics.csv and
	// event file holding the rows written up to that state's step and
	// nothing after, and summary.json records resumed_from_step.
	Resume []byte
}

// Machine is where a run trained, as summary.json reports it: the
// platform, the cores the process may use and the numeric kernels it ran
// (nn.Kernels), which decide whether a seed's bits can be compared.
type Machine struct {
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	CPUs    int    `json:"cpus"`
	Kernels string `json:"kernels"`
}

// Values of Summary.Status.
const (
	// StatusCompleted: the run trained for all its steps.
	StatusCompleted = "completed"
	// StatusInterrupted: the run was stopped early (Ctrl-C).
	StatusInterrupted = "interrupted"
	// StatusDiverged: a loss, gradient or parameter became NaN or ±Inf
	// and the run was stopped there (Reason says which, and when).
	StatusDiverged = "diverged"
	// StatusFailed: something could not be done or saved (Reason).
	StatusFailed = "failed"
)

// Summary is the content of summary.json.
type Summary struct {
	// Status is StatusCompleted, StatusInterrupted, StatusDiverged or
	// StatusFailed; Reason explains the last two.
	Status             string  `json:"status"`
	Reason             string  `json:"reason,omitempty"`
	Algo               string  `json:"algo"`
	Env                string  `json:"env"`
	Seed               uint64  `json:"seed"`
	Steps              int64   `json:"steps"`
	PlannedSteps       int64   `json:"planned_steps"`
	WallSeconds        float64 `json:"wall_seconds"`
	SPS                float64 `json:"sps"`
	Episodes           int64   `json:"episodes"`
	FinalReturnMean100 float64 `json:"final_return_mean_100"`
	FinalReturnStd100  float64 `json:"final_return_std_100"`
	FinalLengthMean100 float64 `json:"final_length_mean_100"`
	Interrupted        bool    `json:"interrupted"`
	// ResumedFromStep is the step of the checkpoint the run continued
	// from (Options.Resume); left out for a run trained from the start.
	ResumedFromStep *int64 `json:"resumed_from_step,omitempty"`
	// Checkpoints says whether the run wrote resumable checkpoints
	// ("on", or "on: …" naming what they leave out) or why not
	// ("off: …"); left out when not set (SetCheckpoints).
	Checkpoints string `json:"checkpoints,omitempty"`
	// EnvsRestarted is set on a resumed run whose envs could not save
	// their state (SetEnvsRestarted); left out otherwise.
	EnvsRestarted *EnvsRestarted `json:"envs_restarted,omitempty"`
	// Deterministic evaluation after training (SetEval); EvalEpisodes is 0
	// when none ran, and the two return fields are then left out of the
	// JSON.
	EvalEpisodes   int     `json:"eval_episodes"`
	EvalReturnMean float64 `json:"eval_return_mean"`
	EvalReturnStd  float64 `json:"eval_return_std"`
	// EvalTeams holds, for a competitive multi-agent env (more than one
	// team, SetEvalTeams), each team's evaluation return by team name;
	// the two return fields above, the sum over teams, are then left out
	// of the JSON (NaN here).
	EvalTeams map[string]TeamReturn `json:"eval_teams,omitempty"`
	// Dist holds the last values of the scalars named dist/… (the
	// distributed executor's counters of drops, repeats and lag), by
	// name; left out when the run has none.
	Dist map[string]float64 `json:"dist,omitempty"`
	// Policies holds the last values of the scalars named policy/<id>/…
	// of a run with several policies (each policy's return, length,
	// episode count and losses), by name; left out when the run has one.
	Policies map[string]float64 `json:"policies,omitempty"`
	// Teams holds the last values of the scalars named team/… of a
	// competitive multi-agent env (each team's return_mean and episodes),
	// by name; left out for other envs.
	Teams map[string]float64 `json:"teams,omitempty"`
	// PolicyLagMax is the last value of the scalar charts/policy_lag_max:
	// for an asynchronous plan (A3C, IMPALA), the most weights versions
	// the learner had taken since the policy of data it learned on; left
	// out when the run has none.
	PolicyLagMax *float64 `json:"policy_lag_max,omitempty"`
	// Machine is where the run trained (Options.Machine); left out when
	// not given.
	Machine *Machine `json:"machine,omitempty"`
}

// TeamReturn is one team's evaluation return: the sum over its agents,
// mean and standard deviation over the episodes.
type TeamReturn struct {
	ReturnMean float64 `json:"return_mean"`
	ReturnStd  float64 `json:"return_std"`
}

// Point is one metrics row as kept for the learning curve.
type Point struct {
	Step       int64
	ReturnMean float64 // mean return of the last Window episodes (NaN before any)
}

// Recorder is the Logger of a training run (it implements algo.Logger): it
// keeps rolling episode statistics over the last Window episodes, writes a
// metrics.csv row every LogEvery steps, draws progress, and on Close writes
// summary.json and curve.png.
//
// Cost: Episode, Scalar and Step are O(1) and allocation-free; a row is a
// few hundred bytes into a buffered writer.
//
// Concurrency: a Recorder is used by the one goroutine running Train. It
// starts no goroutines. I/O errors are kept and returned by Close.
type Recorder struct {
	opt   Options
	start time.Time

	// rolling window of the last Window episodes
	rets, lens []float64
	head, n    int
	episodes   int64
	recentSum  float64 // returns of episodes since the last row
	recentN    int

	scalars     []float64 // current value per declared scalar, NaN = none yet
	index       map[string]int
	undecl      string
	step        int64
	nextRow     int64
	lastRow     int64
	curve       []Point
	csvFile     *os.File
	csv         *bufio.Writer
	events      *tfevents.Writer
	tags        []string  // TensorBoard tags: BaseTags, then the scalars
	tagVals     []float64 // reused row of values for events and Live
	line        []byte
	err         error
	bar         *progressbar.ProgressBar
	lastDraw    time.Time
	closed      bool
	finalized   Summary
	evalRets    []float64
	evalTeams   map[string][]float64
	set         []bool // scalar i has been given a value
	status      string // SetStatus; "" = from Close's argument
	reason      string
	checkpoints string // SetCheckpoints
	restarted   *EnvsRestarted
	resumed     *int64 // the step of Options.Resume's state
	// wallBefore is the training time of the run before its resume.
	wallBefore time.Duration
}

// NewRecorder opens the run's metrics.csv (when opt.Dir is set) and writes
// its header.
func NewRecorder(opt Options) (*Recorder, error) {
	if opt.LogEvery == 0 {
		opt.LogEvery = 1000
	}
	if opt.LineEvery == 0 {
		opt.LineEvery = 5 * time.Second
	}
	var errs []error
	if opt.LogEvery < 0 {
		errs = append(errs, fmt.Errorf("%w: LogEvery %d < 0", ErrOptions, opt.LogEvery))
	}
	if opt.TotalSteps < 0 {
		errs = append(errs, fmt.Errorf("%w: TotalSteps %d < 0", ErrOptions, opt.TotalSteps))
	}
	r := &Recorder{
		opt:     opt,
		rets:    make([]float64, Window),
		lens:    make([]float64, Window),
		scalars: make([]float64, len(opt.Scalars)),
		set:     make([]bool, len(opt.Scalars)),
		index:   make(map[string]int, len(opt.Scalars)),
		nextRow: opt.LogEvery,
		lastRow: -1,
	}
	for i, s := range opt.Scalars {
		if _, dup := r.index[s]; dup {
			errs = append(errs, fmt.Errorf("%w: scalar %q declared twice", ErrOptions, s))
		}
		r.index[s] = i
		r.scalars[i] = math.NaN()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opt.Dir != "" {
		if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		f, err := os.Create(filepath.Join(opt.Dir, "metrics.csv"))
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		r.csvFile, r.csv = f, bufio.NewWriterSize(f, 64<<10)
		for i, c := range baseColumns() {
			if i > 0 {
				r.line = append(r.line, ',')
			}
			r.line = append(r.line, c...)
		}
		for _, c := range opt.Scalars {
			r.line = append(r.line, ',')
			r.line = append(r.line, c...)
		}
		r.line = append(r.line, '\n')
		var st *recorderState
		if opt.Resume != nil {
			if st, err = r.restore(opt.Resume); err != nil {
				return nil, errors.Join(err, f.Close())
			}
		}
		var ev *tfevents.Writer
		if st == nil {
			_, r.err = r.csv.Write(r.line)
			ev, err = tfevents.Create(filepath.Join(opt.Dir, EventsFile))
		} else {
			_, r.err = r.csv.Write(st.CSV)
			ev, err = tfevents.CreateWith(filepath.Join(opt.Dir, EventsFile), st.Events)
		}
		if err != nil {
			errs := errors.Join(err, f.Close())
			return nil, fmt.Errorf("metrics: %w", errs)
		}
		r.events = ev
	}
	if opt.Resume != nil && opt.Dir == "" {
		if _, err := r.restore(opt.Resume); err != nil {
			return nil, err
		}
	}
	r.tags = append(BaseTags(), opt.Scalars...)
	r.tagVals = make([]float64, len(r.tags))
	if opt.Live != nil {
		opt.Live.Start(opt.Algo, opt.Env, opt.Seed, r.tags)
	}
	if opt.Progress != nil && opt.Bar && opt.TotalSteps > 0 {
		r.bar = progressbar.NewOptions64(opt.TotalSteps,
			progressbar.OptionSetWriter(opt.Progress),
			progressbar.OptionSetDescription(opt.Algo+" "+opt.Env),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("steps"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
		)
	}
	r.start = time.Now().Add(-r.wallBefore)
	return r, nil
}

// recorderState is what MarshalState saves: everything a later row or the
// summary depends on, and the files' bytes so far.
type recorderState struct {
	Columns       string // metrics.csv's header line: the run's columns
	Rets, Lens    []float64
	Head, N       int
	Episodes      int64
	RecentSum     float64
	RecentN       int
	Scalars       []float64
	Set           []bool
	Step, LastRow int64
	Curve         []Point
	WallNanos     int64
	CSV, Events   []byte
	Undeclared    string
}

// MarshalState returns the recorder's state at the last Step, for a
// checkpoint that a later run continues from (Options.Resume). It flushes
// metrics.csv and the event file and includes their bytes, so that the
// resumed run's files hold exactly the rows written up to this step, even
// when these files are lost with the process that wrote them.
func (r *Recorder) MarshalState() ([]byte, error) {
	st := recorderState{
		Rets: r.rets, Lens: r.lens, Head: r.head, N: r.n, Episodes: r.episodes,
		RecentSum: r.recentSum, RecentN: r.recentN, Scalars: r.scalars, Set: r.set,
		Step: r.step, LastRow: r.lastRow, Curve: r.curve, WallNanos: int64(time.Since(r.start)),
		Undeclared: r.undecl,
	}
	if r.csv != nil {
		if r.err != nil {
			return nil, r.err
		}
		if err := errors.Join(r.csv.Flush(), r.events.Flush()); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		var err error
		if st.CSV, err = os.ReadFile(r.csvFile.Name()); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		if st.Events, err = os.ReadFile(filepath.Join(r.opt.Dir, EventsFile)); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	st.Columns = string(r.header())
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(st); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return b.Bytes(), nil
}

// header is metrics.csv's first line for the recorder's columns.
func (r *Recorder) header() []byte {
	return []byte(strings.Join(append(baseColumns(), r.opt.Scalars...), ",") + "\n")
}

// restore loads a MarshalState into r and returns it.
func (r *Recorder) restore(b []byte) (*recorderState, error) {
	var st recorderState
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: resume state: %w", ErrOptions, err)
	}
	if h := string(r.header()); st.Columns != h {
		return nil, fmt.Errorf("%w: resume state has the columns %q, this run %q", ErrOptions, strings.TrimSpace(st.Columns), strings.TrimSpace(h))
	}
	if len(st.Rets) != Window || len(st.Lens) != Window || len(st.Scalars) != len(r.scalars) || len(st.Set) != len(r.set) ||
		st.Head < 0 || st.Head >= Window || st.N < 0 || st.N > Window || (st.CSV != nil && !bytes.HasPrefix(st.CSV, []byte(st.Columns))) {
		return nil, fmt.Errorf("%w: resume state is malformed", ErrOptions)
	}
	r.rets, r.lens, r.head, r.n, r.episodes = st.Rets, st.Lens, st.Head, st.N, st.Episodes
	r.recentSum, r.recentN, r.scalars, r.set = st.RecentSum, st.RecentN, st.Scalars, st.Set
	r.step, r.lastRow, r.curve, r.undecl = st.Step, st.LastRow, st.Curve, st.Undeclared
	r.nextRow = (st.Step/r.opt.LogEvery + 1) * r.opt.LogEvery
	r.wallBefore = time.Duration(st.WallNanos)
	step := st.Step
	r.resumed = &step
	return &st, nil
}

// Episode records one finished episode's return and length at step.
func (r *Recorder) Episode(step int64, ret float64, length int) {
	r.rets[r.head] = ret
	r.lens[r.head] = float64(length)
	r.head = (r.head + 1) % Window
	if r.n < Window {
		r.n++
	}
	r.episodes++
	r.recentSum += ret
	r.recentN++
}

// Scalar sets the current value of a declared scalar.
func (r *Recorder) Scalar(name string, value float64) {
	i, ok := r.index[name]
	if !ok {
		if r.undecl == "" {
			r.undecl = name
		}
		return
	}
	r.scalars[i] = value
	r.set[i] = true
}

// Step records progress and writes a row when step reaches the next multiple
// of LogEvery.
func (r *Recorder) Step(step int64) {
	r.step = step
	if step >= r.nextRow {
		r.writeRow()
		r.nextRow = (step/r.opt.LogEvery + 1) * r.opt.LogEvery
	}
	if r.opt.Progress != nil {
		r.progress(false)
	}
}

// ReturnStats returns the mean and (population) standard deviation of the
// returns of the last Window episodes, and how many there were. Both are NaN
// before the first episode.
func (r *Recorder) ReturnStats() (mean, std float64, n int) {
	mean, std = meanStd(r.rets[:r.n])
	return mean, std, r.n
}

// Curve returns the learning curve so far: one Point per metrics row.
func (r *Recorder) Curve() []Point { return r.curve }

// Episodes returns the number of finished episodes so far.
func (r *Recorder) Episodes() int64 { return r.episodes }

func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}

// writeRow appends one metrics.csv row and one curve point. Numbers are
// written with strconv's shortest round-trip form, so equal values give equal
// bytes.
func (r *Recorder) writeRow() {
	if r.step == r.lastRow {
		return
	}
	r.lastRow = r.step
	retMean, retStd := meanStd(r.rets[:r.n])
	lenMean, _ := meanStd(r.lens[:r.n])
	recent := math.NaN()
	if r.recentN > 0 {
		recent = r.recentSum / float64(r.recentN)
	}
	r.recentSum, r.recentN = 0, 0
	r.curve = append(r.curve, Point{Step: r.step, ReturnMean: retMean})
	now := time.Now()
	wall := now.Sub(r.start).Seconds()
	if r.events != nil || r.opt.Live != nil {
		v := append(r.tagVals[:0], float64(r.step)/max(wall, 1e-9), float64(r.episodes), retMean, retStd, lenMean, recent)
		for i, x := range r.scalars {
			if !r.set[i] {
				x = math.NaN()
			}
			v = append(v, x)
		}
		r.tagVals = v
		if r.opt.Live != nil {
			r.opt.Live.Row(r.step, r.episodes, v)
		}
		if r.events != nil && r.err == nil {
			r.err = r.events.Scalars(r.step, now, r.tags, v)
		}
	}
	if r.csv == nil || r.err != nil {
		return
	}
	b := r.line[:0]
	b = strconv.AppendInt(b, r.step, 10)
	b = appendFloat(append(b, ','), wall)
	b = appendFloat(append(b, ','), float64(r.step)/max(wall, 1e-9))
	b = strconv.AppendInt(append(b, ','), r.episodes, 10)
	b = appendFloat(append(b, ','), retMean)
	b = appendFloat(append(b, ','), retStd)
	b = appendFloat(append(b, ','), lenMean)
	b = appendFloat(append(b, ','), recent)
	for i, v := range r.scalars {
		b = append(b, ',')
		if r.set[i] {
			b = appendValue(b, v)
		}
	}
	b = append(b, '\n')
	r.line = b
	// Each row goes to the file at once (one write per LogEvery steps), so
	// a full disk is seen at the row it hits, and Err stops the run there.
	if _, r.err = r.csv.Write(b); r.err == nil {
		r.err = r.csv.Flush()
	}
	if r.err != nil {
		r.err = fmt.Errorf("metrics: write %s at step %d: %w", r.csvFile.Name(), r.step, r.err)
	}
}

// Err returns the first error writing metrics.csv, or nil.
func (r *Recorder) Err() error { return r.err }

// appendFloat writes NaN as an empty cell: for the episode statistics NaN
// only ever means "no episode yet".
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) {
		return b
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendValue writes a scalar the algorithm set: a NaN or infinite loss is
// written as NaN, +Inf or -Inf (strconv's and pandas' spelling), never as
// the empty cell that means "not set yet".
func appendValue(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// SetCheckpoints records summary.json's checkpoints note: "on", or "off:"
// and the reason. Call it before Close.
func (r *Recorder) SetCheckpoints(note string) { r.checkpoints = note }

// EnvsRestarted counts the envs that a run's resumes restarted because
// its checkpoints could not hold their state: each started a new episode
// on resume, and the episode it was in is dropped (not finished, its
// return not logged).
type EnvsRestarted struct {
	// Envs sums the envs restarted over Resumes resumes.
	Envs    int64 `json:"envs"`
	Resumes int64 `json:"resumes"`
	// Reason says why their state could not be saved.
	Reason string `json:"reason"`
}

// SetEnvsRestarted records summary.json's envs_restarted (nil: none).
// Call it before Close.
func (r *Recorder) SetEnvsRestarted(e *EnvsRestarted) { r.restarted = e }

// SetStatus overrides the status that Close would record (completed or
// interrupted) with status and its reason, e.g. StatusDiverged and the
// error that stopped the run. Call it before Close.
func (r *Recorder) SetStatus(status, reason string) {
	r.status, r.reason = status, reason
}

// progress draws the bar or a plain line, at most every 100 ms (bar) or
// LineEvery (lines), and always when final.
func (r *Recorder) progress(final bool) {
	now := time.Now()
	if r.bar != nil {
		if !final && now.Sub(r.lastDraw) < 100*time.Millisecond {
			return
		}
		r.lastDraw = now
		mean, _, n := r.ReturnStats()
		if n > 0 {
			r.bar.Describe(fmt.Sprintf("%s %s return %.1f", r.opt.Algo, r.opt.Env, mean))
		}
		_ = r.bar.Set64(min(r.step, r.opt.TotalSteps))
		return
	}
	if !final && now.Sub(r.lastDraw) < r.opt.LineEvery {
		return
	}
	if r.lastDraw.IsZero() && !final {
		r.lastDraw = now // first call: start the interval, print nothing yet
		return
	}
	r.lastDraw = now
	wall := now.Sub(r.start).Seconds()
	mean, _, n := r.ReturnStats()
	pct := 0.0
	if r.opt.TotalSteps > 0 {
		pct = 100 * float64(r.step) / float64(r.opt.TotalSteps)
	}
	if n > 0 {
		fmt.Fprintf(r.opt.Progress, "%s %s step %d (%.0f%%) %.0f steps/s episodes %d return_mean_100 %.2f\n",
			r.opt.Algo, r.opt.Env, r.step, pct, float64(r.step)/max(wall, 1e-9), r.episodes, mean)
	} else {
		fmt.Fprintf(r.opt.Progress, "%s %s step %d (%.0f%%) %.0f steps/s\n",
			r.opt.Algo, r.opt.Env, r.step, pct, float64(r.step)/max(wall, 1e-9))
	}
}

// SetEval records the returns of a deterministic evaluation run after
// training, for summary.json (eval_episodes, eval_return_mean,
// eval_return_std). Call it before Close.
func (r *Recorder) SetEval(returns []float64) {
	r.evalRets = append(r.evalRets[:0], returns...)
}

// SetEvalTeams records, for a competitive multi-agent env, each team's
// evaluation returns (returns[i] for team names[i], one per episode):
// summary.json then reports them (eval_teams) instead of their sum. With
// fewer than two teams it does nothing.
func (r *Recorder) SetEvalTeams(names []string, returns [][]float64) {
	if len(names) < 2 {
		return
	}
	r.evalTeams = map[string][]float64{}
	for i, n := range names {
		r.evalTeams[n] = append([]float64(nil), returns[i]...)
	}
}

// Close writes the last row, flushes metrics.csv, writes summary.json and
// curve.png (when Dir is set), and returns the summary. interrupted marks a
// run stopped early (Ctrl-C). It returns the first error met while
// recording, including ErrUndeclared. Calling Close again returns the same
// summary and nil.
func (r *Recorder) Close(interrupted bool) (Summary, error) {
	if r.closed {
		return r.finalized, nil
	}
	r.closed = true
	wall := time.Since(r.start).Seconds()
	r.writeRow()
	mean, std := meanStd(r.rets[:r.n])
	lenMean, _ := meanStd(r.lens[:r.n])
	s := Summary{
		Algo: r.opt.Algo, Env: r.opt.Env, Seed: r.opt.Seed,
		Steps: r.step, PlannedSteps: r.opt.TotalSteps,
		WallSeconds: wall, SPS: float64(r.step) / max(wall, 1e-9),
		Episodes:           r.episodes,
		FinalReturnMean100: mean, FinalReturnStd100: std, FinalLengthMean100: lenMean,
		Interrupted: interrupted, ResumedFromStep: r.resumed, Checkpoints: r.checkpoints,
		EnvsRestarted: r.restarted,
		Status:        StatusCompleted, Reason: r.reason,
		Machine: r.opt.Machine,
	}
	switch {
	case r.status != "":
		s.Status = r.status
	case interrupted:
		s.Status = StatusInterrupted
	}
	for i, name := range r.opt.Scalars {
		if strings.HasPrefix(name, "dist/") && r.set[i] {
			if s.Dist == nil {
				s.Dist = map[string]float64{}
			}
			s.Dist[name] = r.scalars[i]
		}
		if strings.HasPrefix(name, "team/") && r.set[i] && !math.IsNaN(r.scalars[i]) {
			if s.Teams == nil {
				s.Teams = map[string]float64{}
			}
			s.Teams[name] = r.scalars[i]
		}
		if name == "charts/policy_lag_max" && r.set[i] {
			v := r.scalars[i]
			s.PolicyLagMax = &v
		}
		if strings.HasPrefix(name, "policy/") && r.set[i] && !math.IsNaN(r.scalars[i]) {
			if s.Policies == nil {
				s.Policies = map[string]float64{}
			}
			s.Policies[name] = r.scalars[i]
		}
	}
	if len(r.evalRets) > 0 {
		s.EvalEpisodes = len(r.evalRets)
		s.EvalReturnMean, s.EvalReturnStd = meanStd(r.evalRets)
		if len(r.evalTeams) > 1 {
			s.EvalReturnMean, s.EvalReturnStd = math.NaN(), math.NaN()
			s.EvalTeams = map[string]TeamReturn{}
			for n, rets := range r.evalTeams {
				m, sd := meanStd(rets)
				s.EvalTeams[n] = TeamReturn{ReturnMean: m, ReturnStd: sd}
			}
		}
	}
	r.finalized = s
	errs := []error{r.err}
	if r.undecl != "" {
		errs = append(errs, fmt.Errorf("%w %q (add it to the algorithm's Spec.Scalars)", ErrUndeclared, r.undecl))
	}
	if r.opt.Progress != nil {
		r.progress(true)
		if r.bar != nil {
			_ = r.bar.Close()
			fmt.Fprintln(r.opt.Progress)
		}
	}
	if r.events != nil {
		errs = append(errs, r.events.Close())
	}
	if r.csv != nil {
		errs = append(errs, r.csv.Flush(), r.csvFile.Close())
		errs = append(errs, writeSummary(filepath.Join(r.opt.Dir, "summary.json"), s))
		title := fmt.Sprintf("%s %s seed %d", r.opt.Algo, r.opt.Env, r.opt.Seed)
		errs = append(errs, SaveCurve(filepath.Join(r.opt.Dir, "curve.png"), title, r.curve))
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("metrics: %w", err)
	}
	return s, nil
}

// writeSummary writes s as indented JSON; NaN (no episode finished) becomes
// null because JSON has no NaN.
func writeSummary(path string, s Summary) error {
	type nullable struct {
		Summary
		FinalReturnMean100 *float64 `json:"final_return_mean_100"`
		FinalReturnStd100  *float64 `json:"final_return_std_100"`
		FinalLengthMean100 *float64 `json:"final_length_mean_100"`
		EvalReturnMean     *float64 `json:"eval_return_mean,omitempty"`
		EvalReturnStd      *float64 `json:"eval_return_std,omitempty"`
	}
	ptr := func(v float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		return &v
	}
	n := nullable{Summary: s, FinalReturnMean100: ptr(s.FinalReturnMean100),
		FinalReturnStd100: ptr(s.FinalReturnStd100), FinalLengthMean100: ptr(s.FinalLengthMean100)}
	if s.EvalEpisodes > 0 {
		n.EvalReturnMean, n.EvalReturnStd = ptr(s.EvalReturnMean), ptr(s.EvalReturnStd)
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadSummary reads a summary.json written by Close.
func ReadSummary(path string) (Summary, error) {
	var s Summary
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("metrics: %w", err)
	}
	s.FinalReturnMean100, s.FinalReturnStd100, s.FinalLengthMean100 = math.NaN(), math.NaN(), math.NaN()
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("metrics: %s: %w", path, err)
	}
	return s, nil
}

// MarkFailed rewrites the summary.json at path as StatusFailed with
// reason, for a run whose recorder closed it as interrupted but which was
// stopped because something else failed (a launcher that ended the run
// when a worker kept crashing): the run is not a clean interruption.
func MarkFailed(path, reason string) error {
	s, err := ReadSummary(path)
	if err != nil {
		return err
	}
	s.Status, s.Reason = StatusFailed, reason
	if err := writeSummary(path, s); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
