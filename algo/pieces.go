package algo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"herd/env"
	"herd/replay"
	"herd/sample"
	"herd/weights"
)

// Spaces are what the pieces need to know of an environment.
type Spaces struct {
	Obs, Act env.Space
	// Rows is the layout of a multi-agent env's rows (env.RowsOf); its
	// Agents is 0 for any other env.
	Rows env.RowLayout
}

// SpacesOf returns e's spaces.
func SpacesOf(e interface {
	ObservationSpace() env.Space
	ActionSpace() env.Space
}) Spaces {
	rows, _ := env.RowsOf(e)
	return Spaces{Obs: e.ObservationSpace(), Act: e.ActionSpace(), Rows: rows}
}

// PolicyNet is an algorithm's policy as a policy worker runs it: a
// deterministic batched forward pass from observations to outputs (logits
// and state values, Gaussian parameters, Q-values, actor means). The
// on-policy algorithms end every row with V(s) (rollout.Segments reads it
// there for the bootstrap values). It has no
// randomness and no state beyond its weights, and row i of the outputs
// depends only on row i of the observations (nn keeps rows bit-independent
// of the batch), so a policy worker may batch requests from any env workers
// in any composition. Not safe for concurrent use: one per policy worker.
type PolicyNet interface {
	// OutDim is the width of one row of outputs.
	OutDim() int
	// SetWeights makes the policy act with v (copying what it needs).
	SetWeights(v *weights.Version) error
	// Version is the number of the weights in use.
	Version() uint64
	// ForwardTo writes the outputs for n observations (n × obs dim,
	// row-major) into dst[:n·OutDim()] and returns that slice.
	ForwardTo(dst, obs []float32, n int) []float32
}

// StatefulPolicy is a PolicyNet whose row for an observation depends on a
// state per env as well (a recurrent network): ForwardTo's row r is env
// r's, and it advances env r's state by one step. An executor that acts
// away from the envs carries each env's state (CanCarriedState): it sets
// the rows' states before a forward pass and reads them after, so the
// network holds no state of its own between calls.
type StatefulPolicy interface {
	PolicyNet
	// StateDim is the state of one env; 0 for a stateless policy.
	StateDim() int
	// SetState makes state (n rows of StateDim) the state of the n envs
	// of the next ForwardTo.
	SetState(state []float32, n int)
	// StateTo appends the state of the n envs (after the last ForwardTo,
	// or as SetState set it) to dst[:0].
	StateTo(dst []float32, n int) []float32
}

// Acts is what a Sampler produced for n envs. Slices are sized by the
// sampler on first use and reused.
type Acts struct {
	// Actions are what the learner trains on: the unclipped Gaussian
	// sample, or a Discrete index (from 0) as a float32. n × action dim.
	Actions []float32
	// EnvActions are what the envs receive: clipped or scaled into the
	// action space, a Discrete index plus the space's start. n × action dim.
	EnvActions []float32
	// LogProbs are log π(a|s) of the sampled actions (on-policy only). n.
	LogProbs []float32
	// Values are V(s) read off the outputs (on-policy only). n.
	Values []float32
}

// Sampler runs on an env worker and turns policy outputs into actions with
// the env worker's own random stream (rng.New(seed, "env-worker", id) in
// the parallel executors; the local executor passes the algorithm's
// historical stream so its bits do not change). Because the draws happen
// here, in row order, the actions do not depend on which policy worker,
// batch or thread produced the outputs. A sampler may keep per-env state
// (Ornstein–Uhlenbeck noise); it is not safe for concurrent use.
type Sampler interface {
	// SampleTo fills dst for the n rows of out (n × PolicyNet.OutDim()) at
	// global step `step` (for exploration schedules).
	SampleTo(dst *Acts, out []float32, n int, step int64)
}

// Stat is one named scalar a learner reports (a name from Spec.Scalars).
type Stat struct {
	Name  string
	Value float64
}

// SegmentLearner learns from on-policy segments (PPO, A2C): one call is one
// iteration (advantages, then the epochs of minibatch updates).
type SegmentLearner interface {
	// Learn updates on seg and returns the iteration's scalars.
	Learn(ctx context.Context, seg *sample.Segment) ([]Stat, error)
	// Weights returns the current weights as a new version (its number
	// grows by one per Learn call; 0 before the first).
	Weights() *weights.Version
	// Close stops the learner's helper goroutine (the parallel actor and
	// critic passes), if any; the learner stays usable.
	Close() error
}

// Reducer joins the M learners of a data-parallel update (the dist
// executor's runtime.learners > 1): each learns from its own segments and
// computes each minibatch gradient on its own rows, the Reducer combines
// them, and every learner takes the same optimizer step, so all hold the
// same parameters. Every method is a collective call: all M learners make
// the same calls in the same order, and each gets the same bits.
type Reducer interface {
	// Learners is M.
	Learners() int
	// AverageGrad replaces g by AverageGrads of the M learners' g, in
	// learner-id order.
	AverageGrad(ctx context.Context, g *Grad) error
	// Sum replaces x by the element-wise sum over the M learners' x,
	// added in learner-id order starting from 0 (so for M = 1 x is
	// unchanged, bit for bit).
	Sum(ctx context.Context, x []float64) error
}

// DataParallel is a SegmentLearner that can learn as one of the M learners
// of a Reducer: one Learn call per learner is one update of the
// algorithm on the union of the learners' segments, the same on every
// learner. Its config is a Minibatcher, so that the executor can give each
// learner a 1/M share of the algorithm's minibatch (pal's sync_batch:
// split) as pal's sync learners do.
type DataParallel interface {
	SegmentLearner
	// SetReducer makes the learner one of r.Learners(): its learning-rate
	// schedule counts updates of M segments, and every gradient and
	// statistic that decides a step (minibatch advantage normalisation,
	// the early stop on the KL estimate) goes through r.
	SetReducer(r Reducer) error
}

// Pieces are an algorithm cut into the parts that executors place on
// different goroutines, processes or machines. Spec.Pieces builds them for
// one run; each constructor may be called any number of times (one policy
// per policy worker, one sampler per env worker).
type Pieces struct {
	// NewPolicy builds a policy holding the run's initial weights
	// (version 0).
	NewPolicy func() (PolicyNet, error)
	// NewSampler builds the sampler of an env worker stepping numEnvs envs,
	// drawing from r.
	NewSampler func(numEnvs int, r *rand.Rand) (Sampler, error)
	// NewSegmentLearner builds the learner of an on-policy algorithm (nil
	// for off-policy ones).
	NewSegmentLearner func() (SegmentLearner, error)
	// DecodeWeights rebuilds a version from weights.Version.Encode's bytes,
	// checked against the run's model (names, shapes): how a process that
	// receives weights over the network gets a version to SetWeights.
	DecodeWeights func(b []byte) (*weights.Version, error)
	// OffPolicy holds the off-policy pieces (zero for on-policy ones).
	OffPolicy
}

// ActorExplorer is implemented by samplers that can explore per actor as
// Ape-X does (Horgan et al. 2018, §4.1): actor i of n acts ε_i-greedily
// with ε_i = ε^(1 + 7·i/(n−1)), a fixed spread from ε down to ε⁸, instead
// of one shared schedule. Executors with several actors call it once,
// before the first action; a sampler whose config does not ask for Ape-X
// exploration ignores it.
type ActorExplorer interface {
	SetActor(i, n int)
}

// ApeXEpsilon returns ε_i = ε^(1 + 7·i/(n−1)) (ε itself for n = 1).
func ApeXEpsilon(eps float64, i, n int) float64 {
	if n <= 1 {
		return eps
	}
	return math.Pow(eps, 1+7*float64(i)/float64(n-1))
}

// RuntimeConfig is the `runtime:` section of a run config: which executor
// runs the pieces, and the values of every executor's keys. Which keys an
// executor reads, and its rules over them, are the executor's
// (Executor.Keys and Check, applied by Admit); a key the named executor
// does not read is refused. docs/guide/executors.md shows each executor's
// section. Unknown keys are errors as everywhere.
type RuntimeConfig struct {
	// Executor names the executor (an Executor.Name: package run lists
	// herd's); default LocalExecutor, the algorithm's own Train.
	Executor string `yaml:"executor"`

	// EnvWorkers, PolicyWorkers and Alpha are the env workers, the policy
	// workers and α, the steps between batch synchronizations; left out
	// (0) means the executor's default, and a count written out must be
	// ≥ 1.
	EnvWorkers    int `yaml:"env_workers,omitempty"`
	PolicyWorkers int `yaml:"policy_workers,omitempty"`
	Alpha         int `yaml:"alpha,omitempty"`
	// Inference is where the dist executor's on-policy env workers get
	// their policy outputs: "policy_workers" (the default: they ask the
	// policy workers over the inference stream) or "inline" (each acts
	// with a policy copy of its own, refreshed from the parameter service
	// before each segment; no policy workers). The off-policy topology is
	// always inline.
	Inference string `yaml:"inference,omitempty"`
	// EnvGroups is G under the dist executor (on-policy): each env worker
	// splits its num_envs envs into G equal groups and steps one while the
	// others' inference requests are in flight; left out (0) means 1.
	EnvGroups int `yaml:"env_groups,omitempty"`
	// StepTime makes every env step take a drawn duration (env.StepTime);
	// results do not change, only the time they take.
	StepTime *env.StepTime `yaml:"step_time,omitempty"`

	// Transport and NATSURL choose the dist and flow executors' carrier
	// (see run/distexec and package flow): "inproc" (default) or "nats",
	// and an external NATS URL (empty: an embedded server on loopback).
	Transport string `yaml:"transport,omitempty"`
	NATSURL   string `yaml:"nats_url,omitempty"`
	// MaxPolicyLag bounds, under the dist executor, how many weights
	// versions older than the learner's the data of an on-policy learner
	// may be (older segments are dropped and counted in dist/dropped);
	// 0: DefaultMaxPolicyLag or twice the env workers, the larger; -1: no
	// bound.
	MaxPolicyLag int `yaml:"max_policy_lag,omitempty"`
	// HeldBytes bounds, under the NATS transport, the bytes of sample
	// pushes a learner holds waiting for room in its queue (re-sends to a
	// stalled learner included); beyond it a push is refused and re-sent
	// by its pusher. 0: transport.DefaultHeldBytes (64 MiB).
	HeldBytes int `yaml:"held_bytes,omitempty"`

	// NumAsync is, under the flow executor, how many rounds the
	// synchronous on-policy plans (A2C, PPO) keep requested from their
	// workers (flow.GatherSyncAhead): 2 collects the next round while the
	// learner learns on this one, so each round acts on weights one
	// update older, as the dist executor's inline env workers do — still
	// the same bits for any number of workers. Left out (0) means 1:
	// GatherSync's barrier, every round on the newest weights.
	NumAsync int `yaml:"num_async,omitempty"`

	// Actors, Learners, LearnerMode, UpdateInterval, RefreshEvery,
	// PublishEvery and MaxLag are PAL's settings (see run/pal); left out
	// (0 or "") means the default, and a count written out must be ≥ 1.
	// Learners and SyncBatch are also the dist executor's: M
	// data-parallel learner processes (see run/distexec).
	Actors         int     `yaml:"actors,omitempty"`
	Learners       int     `yaml:"learners,omitempty"`
	LearnerMode    string  `yaml:"learner_mode,omitempty"`
	SyncBatch      string  `yaml:"sync_batch,omitempty"`
	UpdateInterval float64 `yaml:"update_interval,omitempty"`
	RefreshEvery   int     `yaml:"refresh_every,omitempty"`
	PublishEvery   int     `yaml:"publish_every,omitempty"`
	MaxLag         int     `yaml:"max_lag,omitempty"`
	// ReplayLocking is the off-policy replay's synchronisation, any
	// executor: "two-lock" (default, replay.TwoLock) or "global"
	// (replay.GlobalLock). It changes speed under concurrency, never
	// results on one goroutine.
	ReplayLocking string `yaml:"replay_locking,omitempty"`
}

// Locking is ReplayLocking as a replay.Locking (TwoLock when unset or
// invalid; Validate reports an invalid one).
func (rc RuntimeConfig) Locking() replay.Locking {
	l, err := replay.ParseLocking(rc.ReplayLocking)
	if err != nil {
		return replay.TwoLock
	}
	return l
}

// The values of runtime.inference.
const (
	InferencePolicyWorkers = "policy_workers"
	InferenceInline        = "inline"
)

// DefaultMaxPolicyLag is runtime.max_policy_lag's least default, in weights
// versions; the dist executor raises it to twice its env workers (see
// run/distexec for the measurements it rests on).
const DefaultMaxPolicyLag = 32

// DistScalars are the metrics.csv columns the dist executor adds to an
// algorithm's own: what its streams dropped, repeated and how far behind
// the learner the data was (summary.json's "dist" holds their last values).
var DistScalars = []string{"dist/lag_mean", "dist/lag_max", "dist/dropped", "dist/duplicates", "dist/discarded", "dist/shed",
	"dist/decode_errors", "dist/stale_weights", "dist/abandoned", "dist/infer_obs_bytes",
	"dist/batch_rows_mean", "dist/batch_rows_p50", "dist/batch_rows_p99", "dist/infer_latency_p50_ms", "dist/infer_latency_p99_ms",
	"dist/silent_workers", "dist/silences", "dist/gather_resends", "dist/gather_chunks", "dist/params_checks", "dist/resumes"}

// FlowTransportScalars are the metrics.csv columns the flow executor adds
// when its workers run over a transport other than inproc, named as the
// dist executor's (summary.json's "dist" holds their last values): calls
// answered from a worker's memory instead of running twice (a repeat
// after a lost reply), messages dropped as malformed, workers rejoined
// after they were lost (restarted) and calls sent again to a worker's next
// start (the call in flight when it was lost).
var FlowTransportScalars = []string{"dist/duplicates", "dist/decode_errors", "dist/restarts", "dist/reissued"}

// MaxWorkers bounds every worker count of the runtime section (actors,
// env_workers, policy_workers): far more than any machine or cluster herd
// runs on would use, so an absurd count is refused before anything starts
// even where the memory estimate cannot be checked. The memory estimate
// (EstimateMemory) is the finer bound.
const MaxWorkers = 4096

// countKeys are the runtime keys whose 0 means "the default": written out,
// 0 or less is an error, not the default.
var countKeys = []string{"env_workers", "policy_workers", "alpha", "env_groups", "actors", "learners", "refresh_every", "publish_every", "max_lag", "num_async"}

// checkExplicitCounts refuses a count key that the config or a --set wrote
// out with a value below 1 (omitting it gives the default).
func (rc RuntimeConfig) checkExplicitCounts(explicit []string) error {
	vals := map[string]int{"env_workers": rc.EnvWorkers, "policy_workers": rc.PolicyWorkers, "alpha": rc.Alpha, "env_groups": rc.EnvGroups,
		"actors": rc.Actors, "learners": rc.Learners, "refresh_every": rc.RefreshEvery, "publish_every": rc.PublishEvery, "max_lag": rc.MaxLag,
		"num_async": rc.NumAsync}
	var errs []error
	for _, k := range countKeys {
		if slices.Contains(explicit, k) && vals[k] < 1 {
			errs = append(errs, fmt.Errorf("%w: runtime.%s is %d; it must be ≥ 1 (leave it out for the default)", ErrConfig, k, vals[k]))
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem with the values of the runtime section:
// counts, bounds and the choices each key allows. Which keys an executor
// reads, and its own rules over them, are the executor's (Admit).
func (rc RuntimeConfig) Validate() error {
	var errs []error
	for _, c := range []struct {
		name string
		v    int
	}{{"env_workers", rc.EnvWorkers}, {"policy_workers", rc.PolicyWorkers}, {"alpha", rc.Alpha},
		{"actors", rc.Actors}, {"learners", rc.Learners}, {"refresh_every", rc.RefreshEvery},
		{"publish_every", rc.PublishEvery}, {"max_lag", rc.MaxLag}} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("%w: runtime.%s must be ≥ 0, got %d", ErrConfig, c.name, c.v))
		}
	}
	if rc.EnvGroups < 0 || rc.EnvGroups > MaxWorkers {
		errs = append(errs, fmt.Errorf("%w: runtime.env_groups %d: 1 to %d", ErrConfig, rc.EnvGroups, MaxWorkers))
	}
	switch rc.Inference {
	case "", InferencePolicyWorkers:
	case InferenceInline:
		if rc.PolicyWorkers != 0 {
			errs = append(errs, fmt.Errorf("%w: runtime.policy_workers %d with inference inline: inline env workers act with their own policy copies and no policy worker runs; leave policy_workers out", ErrConfig, rc.PolicyWorkers))
		}
		if rc.EnvGroups > 1 {
			errs = append(errs, fmt.Errorf("%w: runtime.env_groups %d with inference inline: groups overlap inference requests, and inline env workers make none", ErrConfig, rc.EnvGroups))
		}
	default:
		errs = append(errs, fmt.Errorf("%w: runtime.inference %q is not %s or %s", ErrConfig, rc.Inference, InferencePolicyWorkers, InferenceInline))
	}
	if rc.Transport != "" && rc.Transport != "inproc" && rc.Transport != "nats" {
		errs = append(errs, fmt.Errorf("%w: runtime.transport %q is not inproc or nats", ErrConfig, rc.Transport))
	}
	if rc.MaxPolicyLag < -1 {
		errs = append(errs, fmt.Errorf("%w: runtime.max_policy_lag %d: ≥ 1, or -1 for no bound", ErrConfig, rc.MaxPolicyLag))
	}
	if rc.HeldBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: runtime.held_bytes %d: ≥ 1, or 0 for the default", ErrConfig, rc.HeldBytes))
	}
	if rc.NumAsync < 0 || rc.NumAsync > 64 {
		errs = append(errs, fmt.Errorf("%w: runtime.num_async %d: 1 to 64", ErrConfig, rc.NumAsync))
	}
	if rc.NATSURL != "" && rc.Transport != "nats" {
		errs = append(errs, fmt.Errorf("%w: runtime.nats_url needs transport nats", ErrConfig))
	}
	if u := rc.UpdateInterval; u != 0 && (!(u > 0) || u > 1e9) {
		errs = append(errs, fmt.Errorf("%w: runtime.update_interval %v: a positive number of env steps", ErrConfig, u))
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"actors", rc.Actors}, {"env_workers", rc.EnvWorkers}, {"policy_workers", rc.PolicyWorkers}} {
		if c.v > MaxWorkers {
			errs = append(errs, fmt.Errorf("%w: runtime.%s %d: at most %d", ErrConfig, c.name, c.v, MaxWorkers))
		}
	}
	if rc.Learners > 256 {
		errs = append(errs, fmt.Errorf("%w: runtime.learners %d: at most 256", ErrConfig, rc.Learners))
	}
	if m := rc.LearnerMode; m != "" && m != "async" && m != "sync" {
		errs = append(errs, fmt.Errorf("%w: runtime.learner_mode %q is not async or sync", ErrConfig, m))
	}
	if b := rc.SyncBatch; b != "" && b != "split" && b != "full" {
		errs = append(errs, fmt.Errorf("%w: runtime.sync_batch %q is not split or full", ErrConfig, b))
	}
	if s := rc.ReplayLocking; s != "" {
		if _, err := replay.ParseLocking(s); err != nil {
			errs = append(errs, fmt.Errorf("%w: runtime.replay_locking: %w", ErrConfig, err))
		}
	}
	if rc.StepTime != nil {
		if err := rc.StepTime.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: runtime.step_time: %w", ErrConfig, err))
		}
	}
	return errors.Join(errs...)
}

// ConfigAs returns c as algorithm name's config type C (a pointer),
// validated for h: what every Spec.Pieces checks first, since the caller
// may hand it any Config.
func ConfigAs[C interface {
	comparable
	Config
}](name string, c Config, h Header) (C, error) {
	cfg, ok := c.(C)
	var zero C
	if !ok || cfg == zero {
		return zero, fmt.Errorf("%w: %s: config is %T", ErrConfig, name, c)
	}
	if err := cfg.Validate(h); err != nil {
		return zero, err
	}
	return cfg, nil
}
