package algo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"herd/env"
	"herd/internal/redact"

	"go.yaml.in/yaml/v4"
)

// Errors returned by this package. Every configuration problem wraps
// ErrConfig, so callers can tell bad input from a failed run with errors.Is.
var (
	// ErrConfig marks an invalid configuration: an unknown key, a value of
	// the wrong type, or a value a Validate method rejects.
	ErrConfig = errors.New("algo: invalid config")
	// ErrUnknownAlgo is returned when the run names an algorithm that the
	// list passed to Resolve does not contain.
	ErrUnknownAlgo = errors.New("algo: unknown algorithm")
)

// Problems gathers what an algorithm's Validate finds wrong with its
// section (Name), so that one call reports every problem at once.
type Problems struct {
	Name string
	errs []error
}

// Add records one problem, worded by format and a as fmt.Errorf words
// them and prefixed "Name: ", wrapping ErrConfig.
func (p *Problems) Add(format string, a ...any) {
	p.errs = append(p.errs, fmt.Errorf("%w: %s: "+format, append([]any{ErrConfig, p.Name}, a...)...))
}

// Err joins the problems recorded (nil when there are none).
func (p *Problems) Err() error { return errors.Join(p.errs...) }

// Header is the part of a run configuration that every algorithm shares: the
// top-level keys of a config file and the flags of `herd train`.
//
//	algo: ppo            # which Spec trains (Header.Algo == Spec.Name)
//	env: CartPole-v1     # environment id from the env registry
//	seed: 1              # run seed; every random stream derives from it (internal/rng)
//	steps: 500000        # total environment steps, summed over vector envs
//	out: runs/ppo-CartPole-v1-1   # output directory ("" = default below)
//	log_every: 1000      # one metrics.csv row each time this many steps have passed
//	checkpoint_every: 100000  # resumable runs: a checkpoint this often (env steps)
//	checkpoint_keep: 3   # resumable runs: the newest checkpoints kept
//	multiagent: {…}      # optional: several policies (MultiAgentConfig)
//	ppo:                 # the algorithm's own section, keyed by Header.Algo
//	  num_envs: 4
//	  …
type Header struct {
	// Algo names the algorithm (a Spec.Name such as "ppo"). Required.
	Algo string `yaml:"algo"`
	// Env is the environment id, e.g. "CartPole-v1". Required.
	Env string `yaml:"env"`
	// Seed is the run seed. Default 1 (only when absent from the file).
	Seed uint64 `yaml:"seed"`
	// Steps is the total number of environment steps to train for, summed
	// over all vector environments. Required (> 0).
	Steps int64 `yaml:"steps"`
	// Out is the run directory. Default runs/<algo>-<env>-<seed>, or, when
	// that already holds a run, the first of runs/<algo>-<env>-<seed>-2, -3,
	// … that does not (Resolved.OutIsDefault); a directory named on purpose
	// that holds a run is refused instead.
	Out string `yaml:"out,omitempty"`
	// LogEvery is the row interval of metrics.csv in environment steps: the
	// logger writes a row at the first Logger.Step call at or past each
	// multiple of LogEvery. Default 1000. Rows depend only on steps, never
	// on time, so that the same seed gives the same file.
	LogEvery int64 `yaml:"log_every,omitempty"`
	// CheckpointEvery is the interval, in environment steps, of the
	// checkpoints of a resumable run (Spec.Resumable, local executor):
	// one is written at the first iteration boundary at or past each
	// multiple of it, one when the run is interrupted and one at its end,
	// into DIR/checkpoints. 0 means DefaultCheckpointEvery. Like
	// log_every it may change on resume.
	CheckpointEvery int64 `yaml:"checkpoint_every,omitempty"`
	// CheckpointKeep is how many of a run's newest checkpoints are kept;
	// 0 means DefaultCheckpointKeep.
	CheckpointKeep int `yaml:"checkpoint_keep,omitempty"`
	// Runtime chooses the executor and its counts (see RuntimeConfig).
	// Default: executor local.
	Runtime RuntimeConfig `yaml:"runtime,omitempty"`
	// MultiAgent trains several policies in one multi-agent env, each on
	// its own agents (see MultiAgentConfig). Default: one policy shared
	// by every agent.
	MultiAgent MultiAgentConfig `yaml:"multiagent,omitempty"`
	// Envs makes the envs of Env: everything that makes the run's envs
	// goes through it. Not a configuration key: the program sets it
	// (Overrides.Envs), and its zero value makes the registered ids only;
	// cmd/herd's also opens remote ids (herd/env/remote), so that algo and
	// the executors compile without the remote client.
	Envs env.Maker `yaml:"-" json:"-"`
}

// DefaultHeader returns the defaults used for keys a file leaves out.
func DefaultHeader() Header {
	return Header{Seed: 1, LogEvery: 1000, Runtime: RuntimeConfig{Executor: LocalExecutor}}
}

// EnsureDefaults fills the derived defaults (Out, LogEvery) that depend on
// other fields. It changes nothing that is already set.
func (h *Header) EnsureDefaults() {
	if h.LogEvery == 0 {
		h.LogEvery = 1000
	}
	if h.Runtime.Executor == "" {
		h.Runtime.Executor = LocalExecutor
	}
	if h.Out == "" && h.Algo != "" && h.Env != "" {
		h.Out = h.defaultOut()
	}
}

// defaultOut is runs/<algo>-<env>-<seed>; a remote id (grpc://host:port/ID)
// becomes one flat name.
func (h *Header) defaultOut() string {
	envName := strings.NewReplacer("://", "-", "/", "-", ":", "-", "?", "-", "&", "-").Replace(h.Env)
	return filepath.Join("runs", fmt.Sprintf("%s-%s-%d", h.Algo, envName, h.Seed))
}

// Validate reports every problem with the header, each wrapping ErrConfig.
func (h Header) Validate() error {
	var errs []error
	if h.Algo == "" {
		errs = append(errs, fmt.Errorf("%w: algo is required", ErrConfig))
	}
	if h.Env == "" {
		errs = append(errs, fmt.Errorf("%w: env is required", ErrConfig))
	}
	if h.Steps <= 0 {
		errs = append(errs, fmt.Errorf("%w: steps must be > 0, got %d", ErrConfig, h.Steps))
	}
	if h.LogEvery < 0 {
		errs = append(errs, fmt.Errorf("%w: log_every must be >= 0, got %d", ErrConfig, h.LogEvery))
	}
	if h.CheckpointEvery < 0 {
		errs = append(errs, fmt.Errorf("%w: checkpoint_every must be >= 0 (0: every %d steps), got %d", ErrConfig, DefaultCheckpointEvery, h.CheckpointEvery))
	}
	if h.CheckpointKeep < 0 {
		errs = append(errs, fmt.Errorf("%w: checkpoint_keep must be >= 0 (0: the newest %d), got %d", ErrConfig, DefaultCheckpointKeep, h.CheckpointKeep))
	}
	if err := h.Runtime.Validate(); err != nil {
		errs = append(errs, err)
	}
	if h.MultiAgent.Enabled() {
		if err := h.MultiAgent.Validate(); err != nil {
			errs = append(errs, err)
		}
		if h.Env != "" {
			switch ok, err := h.Envs.CheckParallel(h.Env); {
			case err != nil:
				errs = append(errs, fmt.Errorf("%w: multiagent: cannot ask the server of %s whether it serves a multi-agent env: %w", ErrConfig, h.Env, err))
			case !ok:
				errs = append(errs, fmt.Errorf("%w: multiagent needs a multi-agent env (%v, or a remote one its server serves as such), not %s", ErrConfig, env.ParallelIDs(), h.Env))
			}
		}
	}
	return errors.Join(errs...)
}

// Config is an algorithm's own configuration: a pointer to a struct whose
// fields carry `yaml:"snake_case"` tags (those tags are also the --set keys
// of `herd train`). Spec.NewConfig returns it with every default filled in;
// the file and the flags then overwrite only the keys they name, so a zero
// written on purpose (ent_coef: 0) stays zero.
type Config interface {
	// Validate reports every problem (errors.Join), each wrapping
	// ErrConfig, given the resolved header (e.g. a batch size that does
	// not divide the step budget). It must not modify the config.
	Validate(h Header) error
}

// Spec describes one algorithm to the CLI: how to configure it, train it and
// load what it trained. algo/all lists the Specs that herd knows.
type Spec struct {
	// Name is the value of Header.Algo and the key of the config section,
	// lower case ("ppo", "dqn").
	Name string
	// Doc is a one-line description for `herd train --help`.
	Doc string
	// Scalars lists, in order, the names the algorithm passes to
	// Logger.Scalar, e.g. "losses/value_loss", "charts/learning_rate".
	// They become the extra columns of metrics.csv; a name not listed here
	// is an error reported when the logger is closed.
	Scalars []string
	// NewConfig returns a fresh config holding the defaults (CleanRL's for
	// the algorithm). Required.
	NewConfig func() Config
	// Train trains from scratch on rt.Header.Env for rt.Header.Steps steps
	// and returns the trained model. See Runtime for the rules. nil for an
	// algorithm without a loop of its own (a dataflow plan: CanPlan), whose
	// local executor runs, in-process, the plan its config and pieces fit
	// (package flow).
	//
	// On cancellation of ctx, Train stops at the next step boundary and
	// returns the model as trained so far together with ctx.Err(); the
	// caller saves that checkpoint and exits. Any other error may come with
	// a nil Model. Train runs on the caller's goroutine and starts no
	// goroutines that outlive it.
	Train func(ctx context.Context, rt *Runtime, cfg Config) (Model, error)
	// LoadPolicy rebuilds the deterministic policy from a checkpoint written
	// by Model.Save, given the header and config the run was trained with
	// (read back from the run's config.yaml). Required.
	LoadPolicy func(path string, h Header, cfg Config) (Policy, error)
	// Pieces cuts the algorithm into its policy, sampler and learner for a
	// run on spaces sp (see Pieces), for the executors; nil for an
	// algorithm that only its own Train runs.
	Pieces func(h Header, cfg Config, sp Spaces) (*Pieces, error)
	// Can declares what the pieces can do (see Capability); the executors
	// that run the algorithm follow from it (Admit).
	Can Capability
	// Resumable says that Train, the local executor's loop, saves its
	// whole state at Runtime.Checkpoints and continues from a restored
	// one bit for bit (`herd train --resume`). Executors with
	// Executor.Resumable (hts) resume it too, from its pieces (a learner
	// with LearnerCheckpoint); the others cannot resume yet.
	Resumable bool
}

// Runtime is what Train reports to. It is built by the caller (the CLI, a
// test, an example) and used only by the goroutine running Train.
//
// Reporting rules, so that every algorithm's metrics.csv has the same shape:
//   - Log.Episode once per finished episode (of any vector env) with its
//     undiscounted return and length, at the global step it ended;
//   - Log.Scalar for each name in Spec.Scalars after each update (the last
//     value before a row is the one written);
//   - Log.Step(globalStep) at least once per iteration or every few hundred
//     env steps; it is cheap and decides when rows are written.
//
// Global step = environment steps summed over all vector envs.
type Runtime struct {
	// Header is the resolved run header (defaults filled in).
	Header Header
	// Log receives metrics. Never nil: use Discard() when nothing is wanted.
	Log Logger
	// OnTrack, when not nil, is called by Track. TrainRun sets it to watch
	// the parameters for divergence (see ParamModel).
	OnTrack func(Model)
	// Envs, when not nil, makes the training envs of a local Train in
	// place of Header.Envs.MakeVector(Header.Env, n, env.Sync,
	// env.WithEpisodeStatistics()) (see MakeEnvs): the multi-policy
	// executor hands each policy the rows of its own agents this way.
	Envs func(n int) (env.Vector, error)
	// Others are the algorithms of a multiagent section's policies other
	// than the run's (Resolved.Others), for the multi-policy executor.
	Others map[string]AlgoConfig
	// Checkpoints, when not nil, is where a resumable Train
	// (Spec.Resumable) saves its state and finds the state to continue
	// from. nil: no checkpoints.
	Checkpoints *Checkpoints
}

// MakeEnvs makes the n training envs of a local Train: rt.Envs(n) when set,
// else n synchronous envs of Header.Env recording episode statistics (and,
// for a competitive multi-agent env, each team's return: TeamLog).
func (rt *Runtime) MakeEnvs(n int) (env.Vector, error) {
	if rt.Envs != nil {
		return rt.Envs(n)
	}
	v, err := rt.Header.Envs.MakeVector(rt.Header.Env, n, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		return nil, err
	}
	return TeamLog(v, rt.Log), nil
}

// Track tells the caller which model Train trains. Train calls it once,
// right after building the model and before the first update, so that the
// caller can check the parameters while it trains and keep the last finite
// ones (TrainRun stops a diverged run and saves those).
func (rt *Runtime) Track(m Model) {
	if rt.OnTrack != nil {
		rt.OnTrack(m)
	}
}

// Logger receives an algorithm's metrics. Implementations (metrics.Recorder)
// write metrics.csv rows, drive the progress bar and keep the learning curve.
// Calls come from the one goroutine running Train; a Logger need not be safe
// for concurrent use. Methods do not return errors so that the training loop
// stays clean: a Logger keeps its first I/O error and reports it from its own
// Close.
type Logger interface {
	// Episode records one finished episode: its undiscounted return and
	// length, at global step `step`.
	Episode(step int64, ret float64, length int)
	// Scalar sets the current value of a named scalar, such as
	// "losses/value_loss"; the value is written with the next row.
	Scalar(name string, value float64)
	// Step reports that `step` global steps have been taken. It writes a
	// metrics row when step has reached the next multiple of Header.LogEvery.
	Step(step int64)
}

// Discard returns a Logger that drops everything.
func Discard() Logger { return discard{} }

type discard struct{}

func (discard) Episode(int64, float64, int) {}
func (discard) Scalar(string, float64)      {}
func (discard) Step(int64)                  {}

// Policy maps one observation to a deterministic action (the greedy action,
// or the mean of a Gaussian squashed and scaled as in training), for
// `herd eval`. A Policy is not safe for concurrent use.
type Policy interface {
	// Act writes the action for obs into dst and returns dst. For a Discrete
	// action space len(dst) is 1 and dst[0] holds the index as a float32
	// (0, 1, …); for a Box space len(dst) is the action dimension and dst
	// holds the action in the environment's units (within its bounds).
	Act(dst, obs []float32) []float32
}

// Model is what Train returns: a policy whose parameters can be saved.
type Model interface {
	Policy
	// Save writes every parameter needed by Spec.LoadPolicy to path as a
	// safetensors file (nn's safetensors writer), replacing any file there.
	Save(path string) error
}

// Resolved is a fully resolved run: header, algorithm and its config.
type Resolved struct {
	Header Header
	Spec   Spec
	Config Config
	// Others are the algorithms, other than Spec, that train some
	// policies of a multiagent section (MultiAgentConfig.Algos), by name,
	// with their sections' configs; nil when there are none.
	Others map[string]AlgoConfig
	// outDefaulted: neither the file nor a flag named Header.Out.
	outDefaulted bool
}

// OutIsDefault reports whether Header.Out is the default directory that
// Resolve chose (no file key, no flag named it, and nothing set it since).
// Only a default directory moves aside to a free numbered one when it
// already holds a run (FreeRunDir); one named on purpose is refused.
func (r *Resolved) OutIsDefault() bool {
	return r.outDefaulted && r.Header.Out == r.Header.defaultOut()
}

// StepsRun returns the env steps the run will take and the unit they come
// in. On-policy algorithms (any config with RolloutShape) train whole
// rollouts of num_envs × num_steps, so Header.Steps is rounded down to a
// multiple of unit; for the others unit is 1 and steps is Header.Steps.
func (r *Resolved) StepsRun() (steps, unit int64) {
	shape, ok := r.Config.(Rollout)
	if !ok {
		return r.Header.Steps, 1
	}
	n, t, _ := shape.RolloutShape()
	unit = int64(n) * int64(t)
	if m := r.Header.Runtime.Learners; m > 1 {
		unit *= int64(m) // one rollout per data-parallel learner per update
	}
	if unit < 1 {
		return r.Header.Steps, 1
	}
	return r.Header.Steps / unit * unit, unit
}

// Overrides are command-line values that replace file values. A nil pointer
// leaves the file's value. Set holds "key=value" pairs for the algorithm's
// section, or for the runtime: section as "runtime.key=value"; each value is parsed as YAML, so "lr=3e-4" and
// "net_arch=[64,64]" work and an unknown key is an error naming it.
type Overrides struct {
	Algo, Env, Out  *string
	Seed            *uint64
	Steps, LogEvery *int64
	Set             []string
	// Envs is the Header's Envs (not a key of the file).
	Envs env.Maker
}

// Resolve decodes a run configuration file (data may be empty: flags only),
// applies the overrides, picks the Spec named by the header, decodes the
// algorithm's section strictly on top of Spec.NewConfig, and validates both.
// An unknown key anywhere is an error that names it.
func Resolve(data []byte, specs []Spec, ov Overrides) (*Resolved, error) {
	h := DefaultHeader()
	sections := map[string]*yaml.Node{}
	var explicit []string // runtime keys the file or a --set wrote out
	if len(strings.TrimSpace(string(data))) > 0 {
		var root yaml.Node
		if err := yaml.Load(data, &root); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		doc := &root
		if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
			doc = doc.Content[0]
		}
		if doc.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%w: the file must be a mapping of keys to values", ErrConfig)
		}
		// Split the top level: header keys go to Header, every other key
		// must be the section of a known algorithm.
		header := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		seen := map[string]int{}
		for i := 0; i+1 < len(doc.Content); i += 2 {
			k, v := doc.Content[i], doc.Content[i+1]
			if line, dup := seen[k.Value]; dup {
				return nil, fmt.Errorf("%w: line %d: key %q is written twice (first on line %d)", ErrConfig, k.Line, k.Value, line)
			}
			seen[k.Value] = k.Line
			if slices.Contains(headerKeys(), k.Value) {
				header.Content = append(header.Content, k, v)
				continue
			}
			sections[k.Value] = v
			if _, ok := lookup(specs, k.Value); !ok {
				return nil, fmt.Errorf("%w: line %d: unknown key %q (not a header key %v nor an algorithm %v)",
					ErrConfig, k.Line, k.Value, headerKeys(), names(specs))
			}
		}
		if err := header.Load(&h, yaml.WithKnownFields()); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		for i := 0; i+1 < len(header.Content); i += 2 {
			if rt := header.Content[i+1]; header.Content[i].Value == "runtime" && rt.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(rt.Content); j += 2 {
					explicit = append(explicit, rt.Content[j].Value)
				}
			}
		}
	}
	if ov.Algo != nil {
		h.Algo = *ov.Algo
	}
	h.Envs = ov.Envs
	if ov.Env != nil {
		h.Env = *ov.Env
	}
	if ov.Out != nil {
		h.Out = *ov.Out
	}
	if ov.Seed != nil {
		h.Seed = *ov.Seed
	}
	if ov.Steps != nil {
		h.Steps = *ov.Steps
	}
	if ov.LogEvery != nil {
		h.LogEvery = *ov.LogEvery
	}
	// "runtime.KEY=value" sets a key of the runtime: section, the header
	// keys without a flag of their own set the header, and every other
	// pair is the algorithm's.
	var algoSet []string
	for _, kv := range ov.Set {
		if key, _, _ := strings.Cut(kv, "="); slices.Contains(settableHeaderKeys(), strings.TrimSpace(key)) {
			if err := setYAML(&h, kv); err != nil {
				return nil, err
			}
			continue
		}
		if k, ok := strings.CutPrefix(strings.TrimSpace(kv), "runtime."); ok {
			if err := setYAML(&h.Runtime, k); err != nil {
				return nil, fmt.Errorf("%w (runtime.)", err)
			}
			key, _, _ := strings.Cut(k, "=")
			explicit = append(explicit, strings.TrimSpace(key))
			continue
		}
		algoSet = append(algoSet, kv)
	}
	if err := h.Runtime.checkExplicitCounts(explicit); err != nil {
		return nil, err
	}
	outDefaulted := h.Out == ""
	h.EnsureDefaults()
	if err := h.Validate(); err != nil {
		return nil, err
	}
	spec, ok := lookup(specs, h.Algo)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownAlgo, h.Algo, strings.Join(names(specs), ", "))
	}
	others := map[string]AlgoConfig{} // the algorithms of multiagent.algos
	for _, id := range sortedKeys(h.MultiAgent.Algos) {
		name := h.MultiAgent.Algos[id]
		if name == spec.Name {
			continue
		}
		o, ok := lookup(specs, name)
		if !ok {
			return nil, fmt.Errorf("%w: multiagent.algos: policy %s: %w %q (known: %s)", ErrConfig, id, ErrUnknownAlgo, name, strings.Join(names(specs), ", "))
		}
		if sections[name] == nil {
			return nil, fmt.Errorf("%w: multiagent.algos: policy %s is trained by %s, which needs a %s: section (its num_envs counts every agent's rows, as %s's)", ErrConfig, id, name, name, spec.Name)
		}
		if _, done := others[name]; done {
			continue
		}
		ocfg := o.NewConfig()
		if err := sections[name].Load(ocfg, yaml.WithKnownFields()); err != nil {
			return nil, fmt.Errorf("%w: section %s: %w", ErrConfig, name, err)
		}
		if err := checkFinite(ocfg); err != nil {
			return nil, err
		}
		oh, err := sectionHeader(h, name, spec.Name)
		if err != nil {
			return nil, err
		}
		if err := ocfg.Validate(oh); err != nil {
			return nil, err
		}
		others[name] = AlgoConfig{Spec: o, Config: ocfg}
	}
	for name := range sections {
		if _, other := others[name]; name != spec.Name && !other {
			return nil, fmt.Errorf("%w: section %q does not match algo %q", ErrConfig, name, spec.Name)
		}
	}
	if len(others) == 0 {
		others = nil
	}
	cfg := spec.NewConfig()
	if sec := sections[spec.Name]; sec != nil {
		if err := sec.Load(cfg, yaml.WithKnownFields()); err != nil {
			return nil, fmt.Errorf("%w: section %s: %w", ErrConfig, spec.Name, err)
		}
	}
	for _, kv := range algoSet {
		if err := Set(cfg, kv); err != nil {
			return nil, err
		}
	}
	if err := checkFinite(cfg); err != nil {
		return nil, err
	}
	sh, err := sectionHeader(h, spec.Name, spec.Name)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(sh); err != nil {
		return nil, err
	}
	return &Resolved{Header: h, Spec: spec, Config: cfg, Others: others, outDefaulted: outDefaulted}, nil
}

// sectionHeader is the header algorithm name's section is checked
// against: h, or, in a run with a multiagent section whose agents have
// different action spaces, h with the env as the first policy that name
// trains sees it (policyEnv: that policy's action space); the executors
// check each policy's own config again (PolicyRun).
func sectionHeader(h Header, name, run string) (Header, error) {
	m := h.MultiAgent
	if !m.Enabled() {
		return h, nil
	}
	for k, id := range m.Policies {
		if a := m.Algos[id]; a == name || (name == run && a == "") {
			var err error
			h.Env, err = policyEnv(h.Envs, h.Env, m, k)
			return h, err
		}
	}
	return h, nil
}

// Set applies one "key=value" override to cfg (value parsed as YAML),
// strictly: an unknown key is an error naming it.
func Set(cfg Config, kv string) error { return setYAML(cfg, kv) }

// setYAML applies one "key=value" pair to the struct dst points to.
func setYAML(dst any, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return fmt.Errorf("%w: --set %q: want key=value", ErrConfig, kv)
	}
	if strings.ContainsAny(kv, "\n\r") {
		return fmt.Errorf("%w: --set %s: the value must be on one line", ErrConfig, k)
	}
	if err := yaml.Load([]byte(k+": "+v), dst, yaml.WithKnownFields()); err != nil {
		return fmt.Errorf("%w: --set %s: %w", ErrConfig, k, err)
	}
	return nil
}

// Marshal writes the resolved configuration in the same layout Resolve reads
// (header keys, then the algorithm's section), for DIR/config.yaml. A
// NATS URL's user information (a password or token) is replaced by "***":
// a run directory is shared and copied, a secret does not belong there.
func (r *Resolved) Marshal() ([]byte, error) {
	h := r.Header
	h.Runtime.NATSURL = redact.URL(h.Runtime.NATSURL)
	hb, err := yaml.Dump(h)
	if err != nil {
		return nil, err
	}
	secs := map[string]any{r.Spec.Name: r.Config}
	for name, o := range r.Others {
		secs[name] = o.Config
	}
	cb, err := yaml.Dump(secs)
	if err != nil {
		return nil, err
	}
	return append(hb, cb...), nil
}

// checkFinite rejects a NaN or infinite number in any float setting (or
// list of floats) of cfg, naming its key: no algorithm has a use for one,
// and e.g. learning_rate=.inf would otherwise fail only once training runs.
func checkFinite(cfg Config) error {
	var errs []error
	for key, f := range yamlFields(cfg) {
		vals := []reflect.Value{f}
		if f.Kind() == reflect.Slice || f.Kind() == reflect.Array {
			vals = vals[:0]
			for j := 0; j < f.Len(); j++ {
				vals = append(vals, f.Index(j))
			}
		}
		for _, x := range vals {
			if x.CanFloat() && (math.IsNaN(x.Float()) || math.IsInf(x.Float(), 0)) {
				errs = append(errs, fmt.Errorf("%w: %s must be a finite number, got %v", ErrConfig, key, x.Float()))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// headerKeys returns the yaml keys of Header.
func headerKeys() []string {
	return []string{"algo", "env", "seed", "steps", "out", "log_every", "checkpoint_every", "checkpoint_keep", "runtime", "multiagent"}
}

// settableHeaderKeys returns the header keys that --set sets: those
// without a flag (Overrides field) or a section of their own.
func settableHeaderKeys() []string { return []string{"checkpoint_every", "checkpoint_keep"} }

func lookup(specs []Spec, name string) (Spec, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

func names(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}
