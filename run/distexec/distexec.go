package distexec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"herd/algo"
	"herd/env"
	"herd/internal/redact"
	"herd/nn"
	"herd/sample"
	"herd/transport"
	"herd/worker"
)

// ErrConfig marks a run config this executor cannot run.
var ErrConfig = algo.ErrConfig

// Options are the executor's settings (the runtime: section).
type Options struct {
	// EnvWorkers is E (default 1); PolicyWorkers is P (default 1).
	EnvWorkers, PolicyWorkers int
	// Transport is "inproc" (default) or "nats".
	Transport string
	// NATSURL is an external server's URL; empty starts an embedded one.
	NATSURL string

	// LearnerOnly runs only the learner here: env and policy workers are
	// other processes (`herd worker`) on the same run. Set by the CLI.
	LearnerOnly bool
	// Run is the run ID naming the streams (default: Options.runID).
	Run string
	// Dial, when set, makes each role's transport instead of Transport and
	// NATSURL (the CLI dials with its credentials and TLS options).
	Dial func() (transport.Transport, error)
	// MaxPolicyLag is runtime.max_policy_lag (0: algo.DefaultMaxPolicyLag,
	// -1: no bound).
	MaxPolicyLag int
	// Stall is the learner's progress watchdog: no sample for this long
	// ends the run with an error naming the workers alive (0: 60 s, < 0:
	// none).
	Stall time.Duration
	// Watch, when set, is called by learner 0 of several as it starts and
	// returns a channel that yields an error when one of the other
	// learners is gone (their registrations, under herd launch); the run
	// then ends with it at once instead of at the all-gather's deadline.
	Watch func(ctx context.Context) <-chan error
	// Notice receives the learner's one-line notices: a worker gone
	// silent, and back (nil: standard error).
	Notice io.Writer
}

// stall is Stall, or DefaultStall for 0.
func (o Options) stall() time.Duration { return cmp.Or(o.Stall, DefaultStall) }

// DefaultStall is Options.Stall's default.
const DefaultStall = 60 * time.Second

// OptionsOf reads the executor's options from a run header.
func OptionsOf(h algo.Header) Options {
	rc := h.Runtime
	return Options{EnvWorkers: rc.EnvWorkers, PolicyWorkers: rc.PolicyWorkers, Transport: rc.Transport, NATSURL: rc.NATSURL,
		MaxPolicyLag: rc.MaxPolicyLag}
}

// Setup is what every role of a run needs, derived from its config once.
type Setup struct {
	Header  algo.Header
	NumEnvs int // envs per env worker
	T       int // steps per segment
	Gamma   float32
	Pieces  *algo.Pieces
	// Stream are the streams' options (dimensions, the model's parameter
	// list for decoding weights).
	Stream transport.Options
	// Inline is set when the on-policy env workers act with policy copies
	// of their own (runtime.inference: inline, worker.RunEnvInline): no
	// policy workers, no inference stream.
	Inline bool
	// Learners is M, the data-parallel learners (runtime.learners, ≥ 1).
	Learners int
	// Off is set for an off-policy algorithm (DQN, SAC, TD3, DDPG): the
	// Ape-X topology, env workers with inline policy copies and one
	// learner with the replay (worker.RunOffEnv, worker.RunOffLearner).
	Off *OffSetup
	// Metrics, when set, receives an env or policy worker's Prometheus
	// collectors (worker.EnvMetrics, worker.PolicyMetrics) and its
	// streams' counters (worker.RegisterStreamStats) when RunEnvWorker or
	// RunPolicyWorker starts.
	Metrics prometheus.Registerer
	// EnvTiming and PolicyTiming, when set, receive the on-policy env and
	// policy workers' time by phase (profiling).
	EnvTiming    *worker.StepTiming
	PolicyTiming *worker.PolicyTiming

	// policies, for a run with a multiagent section, are its policies'
	// setups; the roles then serve every policy (see trainPolicies).
	policies *policySetups
}

// OffSetup is the off-policy topology's shape.
type OffSetup struct {
	// Chunk is the vector steps per pushed sample, ChunkSteps the env
	// steps it stands for (Chunk × NumEnvs).
	Chunk      int
	ChunkSteps int64
	// RefreshEvery and PublishEvery are runtime.refresh_every (env
	// steps between an env worker's looks at the parameter service) and
	// runtime.publish_every (updates between published versions).
	RefreshEvery, PublishEvery int
	// EnvWorkers is E, which scales the env workers' schedule step.
	EnvWorkers int
}

// ChunkEnvSteps is about how many env steps an off-policy env worker
// sends per sample (Ape-X's actors send every 50): few enough that the
// learner's replay ratio tracks the actors closely, enough that a message
// is not mostly header.
const ChunkEnvSteps = 50

// PolicyWorkers is how many policy workers the topology runs when the
// config asks for requested (0: the default, 1): none for the off-policy
// topology and under inline inference, whose env workers act with inline
// copies.
func (s *Setup) PolicyWorkers(requested int) int {
	if s.Off != nil || s.Inline || (s.policies != nil && !s.policies.onPolicy()) {
		return 0
	}
	return max(requested, 1)
}

// Prepare checks that spec can run distributed and builds its pieces. A
// run with a multiagent section whose policies have algorithms of their
// own (multiagent.algos) needs their sections: PrepareRun.
func Prepare(h algo.Header, spec algo.Spec, cfg algo.Config) (*Setup, error) {
	return prepare(h, spec, cfg, nil)
}

// PrepareRun is Prepare for a resolved config, with the sections of the
// other algorithms its policies train with (herd launch's roles).
func PrepareRun(res *algo.Resolved) (*Setup, error) {
	return prepare(res.Header, res.Spec, res.Config, res.Others)
}

func prepare(h algo.Header, spec algo.Spec, cfg algo.Config, others map[string]algo.AlgoConfig) (*Setup, error) {
	if err := algo.Admit(Executor(), h, spec, others); err != nil {
		return nil, err
	}
	if h.MultiAgent.Enabled() {
		ps, err := preparePolicies(h, spec, cfg, others)
		if err != nil {
			return nil, err
		}
		return &Setup{Header: h, NumEnvs: ps.numEnvs, T: ps.steps, Learners: 1, policies: ps}, nil
	}
	if !spec.Can.Has(algo.CanSegmentLearner) {
		return prepareOff(h, spec, cfg) // Admit: the Ape-X topology's needs are met
	}
	shape, ok := cfg.(algo.Rollout)
	if !ok || spec.Pieces == nil {
		return nil, algo.Undeclared(spec, algo.CanSegmentLearner, "its config has no rollout shape or it has no pieces")
	}
	numEnvs, T, gamma := shape.RolloutShape()
	if numEnvs < 1 || T < 1 {
		return nil, fmt.Errorf("%w: %d envs × %d steps per segment", ErrConfig, numEnvs, T)
	}
	if h.Envs.IsParallel(h.Env) {
		// Its env workers step single envs, which for a multi-agent id
		// would be the turn view (env.TurnEnv), not the agents' rows.
		return nil, fmt.Errorf("%w: %s is multi-agent; the on-policy dist topology does not step agent rows yet (executor local or hts does)", ErrConfig, h.Env)
	}
	e, err := h.Envs.Make(h.Env)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	m := max(h.Runtime.Learners, 1)
	if m > 1 {
		if cfg, err = splitMinibatch(h, spec, cfg, m); err != nil {
			return nil, err
		}
	}
	pieces, err := spec.Pieces(h, cfg, algo.SpacesOf(e))
	if err != nil {
		return nil, err
	}
	if pieces.NewSegmentLearner == nil {
		return nil, algo.Undeclared(spec, algo.CanSegmentLearner, "its pieces have no segment learner")
	}
	if err := worker.CheckGroups(h.Runtime.EnvGroups, numEnvs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	inline := h.Runtime.Inference == algo.InferenceInline
	if inline && (h.Runtime.PolicyWorkers > 0 || h.Runtime.EnvGroups > 1) {
		// Header.Validate says so too; a Setup may be built from a header
		// that was not validated.
		return nil, fmt.Errorf("%w: runtime.inference inline runs no policy workers (policy_workers %d) and no env groups (env_groups %d)",
			ErrConfig, h.Runtime.PolicyWorkers, h.Runtime.EnvGroups)
	}
	p0, err := pieces.NewPolicy()
	if err != nil {
		return nil, err
	}
	like, err := paramsOf(pieces)
	if err != nil {
		return nil, err
	}
	// A recurrent policy's state per env travels beside each observation
	// and each row of outputs (worker.RunPolicy).
	sd := 0
	if sp, ok := p0.(algo.StatefulPolicy); ok {
		sd = sp.StateDim()
	}
	return &Setup{Header: h, NumEnvs: numEnvs, T: T, Gamma: gamma, Pieces: pieces, Inline: inline, Learners: m,
		Stream: transport.Options{ObsDim: e.ObservationSpace().Dim() + sd, OutDim: p0.OutDim() + sd, Like: like, MaxBatchRows: max(4096, numEnvs),
			Capacity: OnCapacity}}, nil
}

// OnCapacity is the on-policy learner's sample queue: none. A push
// returns when the learner takes the segment to learn from it, so a
// segment waits behind at most the other env workers' segments, not
// behind a queue as well, and an inline env worker knows that the next
// version is the one made from its segment (worker.RunEnvInline waits for
// it). The env workers gather segments faster than the learner learns
// them (CartPole with inline inference under herd launch, or either
// inference under herd train), so any queue stays full and each segment
// in it adds a version to the lag of those behind it: with the
// transport's default of 4, PPO CartPole's mean lag was 6.1 versions and
// returns fell to 378; with 1, 2.9–3.2 and returns of 440–490 under herd
// launch; with none and the inline wait, about 1 (docs/BENCHMARKS.md,
// "Distributed runs").
const OnCapacity = transport.NoQueue

// splitMinibatch checks runtime.learners = m > 1 against the topology and
// returns the config each learner learns with: under sync_batch split
// (the default) a minibatch of 1/m of the algorithm's rows, so that one
// update's m shares are the algorithm's minibatch, as pal's sync learners
// share theirs; under full the config unchanged (m times the rows).
func splitMinibatch(h algo.Header, spec algo.Spec, cfg algo.Config, m int) (algo.Config, error) {
	rc := h.Runtime
	if e := max(rc.EnvWorkers, 1); e%m != 0 {
		return nil, fmt.Errorf("%w: runtime.env_workers %d must be a multiple of learners %d (each learner learns from its own env workers, k mod learners)", ErrConfig, e, m)
	}
	mb, ok := cfg.(algo.Minibatcher)
	if !ok {
		return nil, algo.Undeclared(spec, algo.CanDataParallel, "its config is no algo.Minibatcher")
	}
	if rc.SyncBatch == "full" {
		return cfg, nil
	}
	if n := mb.Minibatch(); n%m != 0 || n < m {
		return nil, fmt.Errorf("%w: runtime.learners %d must divide the minibatch of %d rows (sync_batch split)", ErrConfig, m, n)
	}
	return mb.WithMinibatch(mb.Minibatch() / m), nil
}

// splitOff checks runtime.learners = m > 1 for the off-policy topology
// and returns the config each learner learns with: a replay of
// buffer_size/m (its env workers bring 1/m of the transitions) and, under
// sync_batch split (the default), a minibatch of batch_size/m rows, as
// pal's sync learners share theirs; under full, batch_size rows each.
func splitOff(h algo.Header, spec algo.Spec, cfg algo.Config, m int) (algo.Config, error) {
	rc := h.Runtime
	if e := max(rc.EnvWorkers, 1); e%m != 0 {
		return nil, fmt.Errorf("%w: runtime.env_workers %d must be a multiple of learners %d (each learner learns from its own env workers, k mod learners)", ErrConfig, e, m)
	}
	rs, ok1 := cfg.(algo.ReplaySizer)
	mb, ok2 := cfg.(algo.Minibatcher)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: runtime.learners %d: %s cannot share its replay and minibatches among learners", ErrConfig, m, spec.Name)
	}
	if c := rs.ReplayCapacity(); c%m != 0 {
		return nil, fmt.Errorf("%w: runtime.learners %d must divide buffer_size %d (each learner keeps a replay of buffer_size/learners)", ErrConfig, m, c)
	}
	cfg = rs.WithReplayCapacity(rs.ReplayCapacity() / m)
	switch rc.SyncBatch {
	case "full":
		return cfg, nil
	case "", "split":
	default:
		return nil, fmt.Errorf("%w: runtime.sync_batch %q is not split or full", ErrConfig, rc.SyncBatch)
	}
	if n := mb.Minibatch(); n%m != 0 {
		return nil, fmt.Errorf("%w: runtime.learners %d must divide batch_size %d (sync_batch split; sync_batch: full gives each learner %d rows)", ErrConfig, m, n, n)
	}
	return cfg.(algo.Minibatcher).WithMinibatch(mb.Minibatch() / m), nil
}

func prepareOff(h algo.Header, spec algo.Spec, cfg algo.Config) (*Setup, error) {
	shape, ok := cfg.(algo.TransitionShape)
	if !ok || spec.Pieces == nil {
		return nil, algo.Undeclared(spec, algo.CanTransitionLearner, "its config has no transition shape or it has no pieces")
	}
	numEnvs, _ := shape.TransitionShape()
	rc := h.Runtime
	m := max(rc.Learners, 1)
	if m == 1 && rc.SyncBatch != "" {
		return nil, fmt.Errorf("%w: runtime.sync_batch %q: the run has one learner", ErrConfig, rc.SyncBatch)
	}
	if m > 1 {
		var err error
		if cfg, err = splitOff(h, spec, cfg, m); err != nil {
			return nil, err
		}
	}
	off, err := newOffSetup(rc, numEnvs, max(1, ChunkEnvSteps/max(numEnvs, 1)))
	if err != nil {
		return nil, err
	}
	if rc.EnvGroups > 1 || rc.StepTime != nil {
		return nil, fmt.Errorf("%w: runtime.env_groups and step_time are on-policy settings: the off-policy topology (%s) steps its envs as one vector with an inline policy copy", ErrConfig, spec.Name)
	}
	if rc.PolicyWorkers > 0 || rc.Inference == algo.InferencePolicyWorkers {
		return nil, fmt.Errorf("%w: policy_workers %d, inference %q: the off-policy topology (%s) has no policy workers; its env workers act with inline policy copies",
			ErrConfig, rc.PolicyWorkers, rc.Inference, spec.Name)
	}
	e, err := h.Envs.Make(h.Env)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	pieces, err := spec.Pieces(h, cfg, algo.SpacesOf(e))
	if err != nil {
		return nil, err
	}
	like, outDim, split, err := offParams(spec, pieces)
	if err != nil {
		return nil, err
	}
	if m > 1 && !split {
		return nil, algo.Undeclared(spec, algo.CanGradApply, "its learner is no algo.SplitLearner")
	}
	return &Setup{Header: h, NumEnvs: numEnvs, Pieces: pieces, Off: off, Learners: m,
		Stream: transport.Options{ObsDim: e.ObservationSpace().Dim(), OutDim: outDim, Like: like, MaxBatchRows: max(4096, numEnvs),
			Capacity: OffCapacity}}, nil
}

// newOffSetup is the off-policy topology's shape for env workers of
// numEnvs envs pushing a sample every chunk vector steps, with runtime
// rc's refresh and publish periods (default 1).
func newOffSetup(rc algo.RuntimeConfig, numEnvs, chunk int) (*OffSetup, error) {
	off := &OffSetup{Chunk: chunk, RefreshEvery: rc.RefreshEvery, PublishEvery: rc.PublishEvery,
		EnvWorkers: max(rc.EnvWorkers, 1)}
	off.ChunkSteps = int64(off.Chunk * numEnvs)
	if off.RefreshEvery == 0 {
		off.RefreshEvery = 1
	}
	if off.PublishEvery == 0 {
		off.PublishEvery = 1
	}
	if numEnvs < 1 || off.RefreshEvery < 1 || off.PublishEvery < 1 {
		return nil, fmt.Errorf("%w: num_envs %d, refresh_every %d and publish_every %d must be ≥ 1", ErrConfig, numEnvs, off.RefreshEvery, off.PublishEvery)
	}
	return off, nil
}

// offParams checks that pieces are off-policy and returns their model's
// parameter list (for decoding weights off the wire), the policy's output
// width, and whether the learner can split its updates (runtime.learners
// > 1).
func offParams(spec algo.Spec, pieces *algo.Pieces) (like []*nn.Param, outDim int, split bool, err error) {
	if pieces.NewTransitionLearner == nil {
		return nil, 0, false, algo.Undeclared(spec, algo.CanTransitionLearner, "its pieces have no transition learner")
	}
	p0, err := pieces.NewPolicy()
	if err != nil {
		return nil, 0, false, err
	}
	l, err := pieces.NewTransitionLearner()
	if err != nil {
		return nil, 0, false, err
	}
	v := l.Weights()
	_ = l.Close()
	like = make([]*nn.Param, v.Len())
	for i := range like {
		like[i] = v.Param(i)
	}
	_, split = l.(algo.SplitLearner)
	return like, p0.OutDim(), split, nil
}

// OffCapacity is the off-policy learner's sample queue: one chunk. The
// replay is the off-policy topology's buffer (Ape-X's actors add to it
// directly); a queue in front of it holds nothing the learner could not
// wait for, and only ages what it holds: the learner runs the updates of
// every chunk ahead in the queue (Chunk × NumEnvs / train_frequency each,
// 5 for DQN's CartPole settings) before it inserts the next, so each
// queued chunk adds that many versions to the policy lag of the data
// behind it. With the transport's default of 4 the lag of DQN CartPole
// was 41 versions on average; see docs/BENCHMARKS.md for it with one.
const OffCapacity = 1

// The streams a role opens besides the sample stream.
const (
	withInference = 1 << iota
	// withParams: on NATS the parameter service watches the weights bucket
	// and downloads every version, which an env worker served by policy
	// workers never reads.
	withParams
)

// roleStreams opens the streams of a role on tr: the sample stream, and
// the inference stream and parameter service that with asks for; close
// closes them all.
func (s *Setup) roleStreams(ctx context.Context, tr transport.Transport, run string, with int) (inf transport.InferenceStream, smp transport.SampleStream, par transport.ParamService, closeAll func(), err error) {
	return s.roleStreamsTo(ctx, tr, run, with, 0)
}

// roleStreamsTo is roleStreams with the sample stream of learner slot
// learner's queue.
func (s *Setup) roleStreamsTo(ctx context.Context, tr transport.Transport, run string, with int, learner int) (inf transport.InferenceStream, smp transport.SampleStream, par transport.ParamService, closeAll func(), err error) {
	var closers []func() error
	closeAll = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	if with&withInference != 0 {
		if inf, err = tr.Inference(ctx, run, s.Stream); err != nil {
			return
		}
		closers = append(closers, inf.Close)
	}
	so := s.Stream
	so.Learner, so.HeldBytes = learner, s.Header.Runtime.HeldBytes
	if smp, err = tr.Samples(ctx, run, so); err != nil {
		return
	}
	closers = append(closers, smp.Close)
	if with&withParams == 0 {
		return
	}
	if par, err = tr.Params(ctx, run, s.Stream); err != nil {
		return
	}
	closers = append(closers, par.Close)
	return
}

// RunEnvWorker runs env worker slot on tr until ctx ends: it makes its
// NumEnvs envs, steps them and pushes segments.
func (s *Setup) RunEnvWorker(ctx context.Context, slot int, tr transport.Transport, run string) error {
	if s.Off != nil {
		return s.runOffEnvWorker(ctx, slot, tr, run)
	}
	if s.policies != nil {
		return s.policies.runEnvWorker(ctx, slot, tr, run)
	}
	envs := make([]env.Env, 0, s.NumEnvs)
	defer func() {
		for _, e := range envs {
			e.Close()
		}
	}()
	opts := []env.Option{env.WithEpisodeStatistics()}
	if st := s.Header.Runtime.StepTime; st != nil {
		opts = append(opts, env.WithStepTime(*st))
	}
	for range s.NumEnvs {
		e, err := s.Header.Envs.Make(s.Header.Env, opts...)
		if err != nil {
			return err
		}
		envs = append(envs, e)
	}
	with := withInference
	if s.Inline {
		with = withParams
	}
	// Env worker k feeds learner k mod M.
	inf, smp, par, closeAll, err := s.roleStreamsTo(ctx, tr, run, with, slot%max(s.Learners, 1))
	if err != nil {
		return err
	}
	defer closeAll()
	streams := map[string]func() transport.Stats{"samples": smp.Stats}
	if s.Inline {
		streams["params"] = par.Stats
	} else {
		streams["inference"] = inf.Stats
	}
	met, err := s.envMetrics(streams)
	if err != nil {
		return err
	}
	mem, prog, save, err := resume(ctx, tr, run, EnvWorkerName(slot))
	if err != nil {
		return err
	}
	defer mem.Close()
	cfg := worker.EnvConfig{Slot: slot, Seed: s.Header.Seed, Envs: envs, Steps: s.T, Gamma: s.Gamma, Peers: max(s.Header.Runtime.EnvWorkers, 1) / max(s.Learners, 1),
		Groups: s.Header.Runtime.EnvGroups, Resume: prog, OnPushed: save, Timing: s.EnvTiming, Metrics: met}
	if !s.Inline {
		cfg.OnPushed = func(p transport.Progress) {
			p.InferObsBytes += inf.Stats().ObsBytes
			save(p)
		}
		return worker.RunEnv(ctx, cfg, s.Pieces, inf, smp)
	}
	cfg.OnPushed = fetchFailedSaver(par, save)
	return worker.RunEnvInline(ctx, cfg, s.Pieces, par, smp)
}

// fetchFailedSaver returns the progress saver of an env worker with an
// inline copy: its record adds the versions its parameter service could
// not download to the worker's count, which holds its earlier
// incarnations' and its own segments started on old weights (both
// dist/stale_weights).
func fetchFailedSaver(par transport.ParamService, save func(transport.Progress)) func(transport.Progress) {
	return func(p transport.Progress) {
		p.FetchFailed += par.Stats().FetchFailed
		save(p)
	}
}

// EnvWorkerName and PolicyWorkerName are the names under which the
// workers of slot register and keep their progress.
func EnvWorkerName(slot int) string    { return "env-" + strconv.Itoa(slot) }
func PolicyWorkerName(slot int) string { return "policy-" + strconv.Itoa(slot) }

// saveEvery is how often a worker stores its progress at most: a
// restarted worker repeats no sample id whatever it reads (its
// incarnation is new), so what a crash loses of it is at most this much
// of the ε schedule and of the counters.
const saveEvery = time.Second

// resume starts a new incarnation of the worker name and returns the
// membership service (the caller closes it), where the worker continues
// from, and a function that stores its progress at most every saveEvery.
func resume(ctx context.Context, tr transport.Transport, run, name string) (transport.Membership, transport.Progress, func(transport.Progress), error) {
	mem, err := tr.Membership(ctx, run, transport.Options{})
	if err != nil {
		return nil, transport.Progress{}, nil, err
	}
	prog, err := mem.Resume(ctx, name)
	if err != nil {
		_ = mem.Close()
		return nil, transport.Progress{}, nil, err
	}
	var last time.Time
	save := func(p transport.Progress) {
		if time.Since(last) < saveEvery {
			return
		}
		last = time.Now()
		sctx, cancel := context.WithTimeout(ctx, saveEvery)
		defer cancel()
		_ = mem.Save(sctx, name, p) // the next save retries; a restart then repeats a little of the schedule
	}
	return mem, prog, save, nil
}

// runOffEnvWorker runs an off-policy env worker: its NumEnvs envs as one
// vector, an inline policy copy, transitions pushed in chunks.
func (s *Setup) runOffEnvWorker(ctx context.Context, slot int, tr transport.Transport, run string) error {
	envs, err := s.Header.Envs.MakeVector(s.Header.Env, s.NumEnvs, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		return err
	}
	defer envs.Close()
	return s.runOffEnv(ctx, slot, tr, run, envs)
}

// runOffEnv runs off-policy env worker slot on envs (its own vector, or
// its policy's part of a multi-agent vector): an inline policy copy,
// transitions pushed in chunks on run's streams.
func (s *Setup) runOffEnv(ctx context.Context, slot int, tr transport.Transport, run string, envs env.Vector) error {
	// Env worker k feeds learner k mod M.
	_, smp, par, closeAll, err := s.roleStreamsTo(ctx, tr, run, withParams, slot%max(s.Learners, 1))
	if err != nil {
		return err
	}
	defer closeAll()
	met, err := s.envMetrics(map[string]func() transport.Stats{"params": par.Stats, "samples": smp.Stats})
	if err != nil {
		return err
	}
	mem, prog, save, err := resume(ctx, tr, run, EnvWorkerName(slot))
	if err != nil {
		return err
	}
	defer mem.Close()
	return worker.RunOffEnv(ctx, worker.OffEnvConfig{Slot: slot, Seed: s.Header.Seed, Envs: envs, Chunk: s.Off.Chunk,
		RefreshEvery: s.Off.RefreshEvery, StepScale: int64(s.Off.EnvWorkers), Actors: s.Off.EnvWorkers, Resume: prog, Metrics: met,
		OnPushed: fetchFailedSaver(par, save)}, s.Pieces, par, smp)
}

// RunPolicyWorker runs policy worker slot on tr until ctx ends. It keeps
// its counters (weights it could not fetch, requests it skipped) in its
// progress record, where the learner adds them up.
func (s *Setup) RunPolicyWorker(ctx context.Context, slot int, tr transport.Transport, run string) error {
	if s.Off != nil || s.Inline {
		return fmt.Errorf("%w: this topology has no policy workers (env workers act with inline copies)", ErrConfig)
	}
	if s.policies != nil {
		return s.policies.runPolicyWorker(ctx, slot, tr, run)
	}
	inf, _, par, closeAll, err := s.roleStreams(ctx, tr, run, withInference|withParams)
	if err != nil {
		return err
	}
	defer closeAll()
	var met *worker.PolicyMetrics
	if s.Metrics != nil {
		if err := s.streamStats(map[string]func() transport.Stats{"inference": inf.Stats, "params": par.Stats}); err != nil {
			return err
		}
		if met, err = worker.NewPolicyMetrics(s.Metrics); err != nil {
			return err
		}
	}
	mem, prog, save, err := resume(ctx, tr, run, PolicyWorkerName(slot))
	if err != nil {
		return err
	}
	defer mem.Close()
	tm := s.PolicyTiming
	if tm == nil {
		tm = &worker.PolicyTiming{}
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * saveEvery)
		defer t.Stop()
		var saved transport.Progress
		current := func() transport.Progress {
			p := prog
			p.FetchFailed += par.Stats().FetchFailed
			p.Abandoned += inf.Stats().Abandoned
			p.Batches += uint64(tm.Batches.Load())
			p.BatchRows += uint64(tm.Rows.Load())
			p.BatchRowsP50, p.BatchRowsP99, p.LatencyP50us, p.LatencyP99us = tm.Percentiles()
			return p
		}
		for {
			select {
			case <-t.C:
			case <-pctx.Done():
				// A last record on the way out, so that a learner that
				// reads after the workers stopped sees the whole run.
				if p := current(); p != saved {
					sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveEvery)
					_ = mem.Save(sctx, PolicyWorkerName(slot), p)
					cancel()
				}
				return
			}
			if p := current(); p != saved {
				save(p)
				saved = p
			}
		}
	}()
	defer func() { stop(); <-done }()
	return worker.RunPolicyWith(ctx, worker.PolicyConfig{Metrics: met, Timing: tm}, s.Pieces, inf, par)
}

// envMetrics registers an env worker's collectors and its streams'
// counters on s.Metrics; nil without s.Metrics.
func (s *Setup) envMetrics(streams map[string]func() transport.Stats) (*worker.EnvMetrics, error) {
	if s.Metrics == nil {
		return nil, nil
	}
	if err := s.streamStats(streams); err != nil {
		return nil, err
	}
	return worker.NewEnvMetrics(s.Metrics)
}

// streamStats registers each stream's counters on s.Metrics.
func (s *Setup) streamStats(streams map[string]func() transport.Stats) error {
	for name, f := range streams {
		if err := worker.RegisterStreamStats(s.Metrics, name, f); err != nil {
			return err
		}
	}
	return nil
}

// Train runs spec's pieces as a distributed topology for rt.Header.Steps
// env steps and returns the learner's model.
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	if h.MultiAgent.Enabled() {
		return trainPolicies(ctx, rt, spec, cfg, opt)
	}
	st, err := Prepare(h, spec, cfg)
	if err != nil {
		return nil, err
	}
	if opt.EnvWorkers == 0 {
		opt.EnvWorkers = 1
	}
	if opt.MaxPolicyLag == 0 {
		opt.MaxPolicyLag = h.Runtime.MaxPolicyLag
	}
	opt.PolicyWorkers = st.PolicyWorkers(opt.PolicyWorkers)
	if opt.LearnerOnly {
		opt.EnvWorkers, opt.PolicyWorkers = 0, 0
	}
	if opt.EnvWorkers < 0 || opt.PolicyWorkers < 0 {
		return nil, fmt.Errorf("%w: env_workers %d and policy_workers %d must be ≥ 1", ErrConfig, opt.EnvWorkers, opt.PolicyWorkers)
	}
	var iters int
	if st.Off == nil {
		if iters, err = st.iterations(); err != nil {
			return nil, err
		}
	}
	newTransport, closeConns := opt.Dial, func() {}
	if newTransport == nil {
		if newTransport, closeConns, err = transportMaker(opt); err != nil {
			return nil, err
		}
	}
	defer closeConns()
	run := opt.runID(h)
	release, err := claimRun(ctx, opt, newTransport, run)
	if err != nil {
		return nil, err
	}
	defer release()

	ws := newWorkers(ctx, newTransport)
	defer ws.wait()
	wctx, start := ws.ctx, ws.start
	for k := range opt.PolicyWorkers {
		if err := start(func(tr transport.Transport) error { return st.RunPolicyWorker(wctx, k, tr, run) }); err != nil {
			return nil, err
		}
	}
	for k := range opt.EnvWorkers {
		if err := start(func(tr transport.Transport) error { return st.RunEnvWorker(wctx, k, tr, run) }); err != nil {
			return nil, err
		}
	}
	stall := opt.stall()
	for j := 1; j < st.Learners && !opt.LearnerOnly; j++ {
		if err := start(func(tr transport.Transport) error { return st.RunLearnerPeer(wctx, j, tr, run, opt) }); err != nil {
			return nil, err
		}
	}
	end, err := st.openLearnerEnd(ctx, newTransport, run)
	if err != nil {
		return nil, err
	}
	defer end.close()
	tr, smp, par := end.tr, end.smp, end.par
	mon := newMonitor(rt.Log, smp, end.mem, opt.Notice, stall)
	mon.maxLag = maxLagOf(opt, st.Header)
	var group *worker.LearnerGroup
	if st.Learners > 1 {
		coll, err := tr.Collective(ctx, run, transport.Options{Learner: 0, Learners: st.Learners, GatherTimeout: gatherTimeout(stall)})
		if err != nil {
			return nil, err
		}
		defer coll.Close()
		group = &worker.LearnerGroup{Collective: coll, Learners: st.Learners}
		mon.gather, _ = coll.(gatherStater)
		if opt.Watch != nil {
			gone := opt.Watch(wctx)
			ws.wg.Go(func() {
				select {
				case err := <-gone:
					ws.fail(err)
				case <-wctx.Done():
				}
			})
		}
	}
	// cp's learner stays nil without checkpoints: save does nothing.
	cp := &checkpointer{ck: rt.Checkpoints, smp: smp, mon: mon, dedup: opt.LearnerOnly}
	saving := rt.Checkpoints != nil && rt.Checkpoints.Disabled() == ""
	minV, err := minVersion(ctx, par)
	if err != nil {
		return nil, err
	}
	if st.Off != nil {
		return st.trainOff(ctx, wctx, rt, smp, par, mon, stall, group, ws, cp, saving, minV)
	}
	var resume func(algo.SegmentLearner) (int, error)
	if saving {
		resume = cp.start
	}
	l, err := worker.RunLearner(wctx, worker.LearnerConfig{Iterations: iters, MaxLag: mon.maxLag, Stall: stall, Alive: mon.alive,
		Counters: &mon.cnt, Group: group, Start: resume, MinVersion: minV,
		OnIteration: func(_ int, seg *sample.Segment, stats []algo.Stat) {
			for _, e := range seg.Episodes {
				rt.Log.Episode(cp.step+int64((e.At+1)*seg.N), e.Return, e.Length)
			}
			cp.step += int64(seg.T * seg.N)
			cp.it++
			for _, st := range stats {
				rt.Log.Scalar(st.Name, st.Value)
			}
			mon.step = cp.step
			mon.scalars(wctx, false)
			rt.Log.Step(cp.step)
			if ck := rt.Checkpoints; ck != nil && ck.Due(cp.step) && cp.it < iters {
				if serr := cp.save(); serr != nil {
					ws.fail(serr)
				}
			}
		}}, st.Pieces, smp, par)
	werr := ws.wait()
	mon.scalars(ctx, true)
	if err == nil && werr == nil || ctx.Err() != nil && cp.atBoundary() {
		// The run's end, or its interruption between two updates.
		if serr := cp.save(); serr != nil && err == nil {
			err = serr
		}
	}
	return learnerModel(l, werr, err, spec.Name+"'s learner")
}

// learnerModel returns the model of l, the learner called who in the
// error where it has none, and the run's error: the workers' (werr)
// first, then the learner's.
func learnerModel(l any, werr, err error, who string) (algo.Model, error) {
	var model algo.Model
	if m, ok := l.(algo.Modeler); ok {
		model = m.Model()
	}
	if werr != nil {
		return model, werr
	}
	if err != nil {
		return model, err
	}
	if model == nil {
		return nil, fmt.Errorf("%w: %s cannot hand out its model", ErrConfig, who)
	}
	return model, nil
}

// iterations is the on-policy learner's updates: steps / (M × num_envs
// × num_steps), one segment per learner each.
func (s *Setup) iterations() (int, error) {
	h := s.Header
	iters := int(h.Steps / int64(s.NumEnvs*s.T*s.Learners))
	if iters < 1 {
		return 0, fmt.Errorf("%w: steps %d is less than one segment (%d envs × %d steps) per learner (%d)", ErrConfig, h.Steps, s.NumEnvs, s.T, s.Learners)
	}
	return iters, nil
}

// maxLagOf is the learner's lag bound (0: none): runtime.max_policy_lag,
// or by default algo.DefaultMaxPolicyLag or twice the env workers, the
// larger. E env workers pushing in turn put a segment about E − 1 updates
// behind the learner in steady state, so a fixed bound below that drops
// a share of every worker's segments.
func maxLagOf(opt Options, h algo.Header) uint64 {
	switch {
	case opt.MaxPolicyLag < 0:
		return 0
	case opt.MaxPolicyLag > 0:
		return uint64(opt.MaxPolicyLag)
	}
	e := max(opt.EnvWorkers, h.Runtime.EnvWorkers, 1)
	return max(algo.DefaultMaxPolicyLag, 2*uint64(e))
}

// gatherTimeout is the learners' all-gather deadline: longer than the
// sample watchdog, whose error (naming the env workers alive) says more
// when a learner waits for samples, not for another learner.
func gatherTimeout(stall time.Duration) time.Duration {
	if stall > 0 {
		return stall + 15*time.Second
	}
	return 0 // the transport's default
}

// LearnerName is the registration of learner slot of a run.
func LearnerName(slot int) string { return "learner-" + strconv.Itoa(slot) }

// RunLearnerPeer runs data-parallel learner slot (1 … runtime.learners−1)
// on tr until the run's updates are done: it learns from its own env
// workers' segments, shares every gradient with the other learners and
// publishes nothing (learner 0 publishes and reports).
func (s *Setup) RunLearnerPeer(ctx context.Context, slot int, tr transport.Transport, run string, opt Options) error {
	if slot < 1 || slot >= s.Learners {
		return fmt.Errorf("%w: learner %d: the run has %d learner(s); learner 0 is the run's own", ErrConfig, slot, s.Learners)
	}
	var iters int
	if s.Off == nil {
		var err error
		if iters, err = s.iterations(); err != nil {
			return err
		}
	}
	if opt.MaxPolicyLag == 0 {
		opt.MaxPolicyLag = s.Header.Runtime.MaxPolicyLag
	}
	stall := opt.stall()
	_, smp, _, closeAll, err := s.roleStreamsTo(ctx, tr, run, 0, slot)
	if err != nil {
		return err
	}
	defer closeAll()
	coll, err := tr.Collective(ctx, run, transport.Options{Learner: slot, Learners: s.Learners, GatherTimeout: gatherTimeout(stall)})
	if err != nil {
		return err
	}
	defer coll.Close()
	group := &worker.LearnerGroup{Collective: coll, Learners: s.Learners, Slot: slot}
	if s.Off != nil {
		_, err = worker.RunOffLearner(ctx, worker.OffLearnerConfig{Steps: s.Header.Steps, StepsPerSample: s.Off.ChunkSteps,
			PublishEvery: s.Off.PublishEvery, Stall: stall, Group: group}, s.Pieces, smp, nil)
		return err
	}
	_, err = worker.RunLearner(ctx, worker.LearnerConfig{Iterations: iters, MaxLag: maxLagOf(opt, s.Header), Stall: stall,
		Group: group}, s.Pieces, smp, nil)
	return err
}

// monitor gathers the run's counters for the learner's metrics: its own
// (cnt), its sample stream's, and the workers' (their progress records,
// read at most every readEvery). From the same records it tells when a
// worker goes silent (see watch).
type monitor struct {
	log algo.Logger
	smp transport.SampleStream
	mem transport.Membership
	cnt worker.Counters
	// step is the learner's global step, for the notices.
	step int64

	read                       time.Time
	stale, abandoned, obsBytes uint64
	batches, rows              uint64
	rowsP50, rowsP99           uint32
	latP50, latP99             uint64 // µs

	notice   io.Writer
	who      string        // the notices' prefix for a policy of several ("policy/<id>/")
	after    time.Duration // silentAfter of the run's stall bound
	now      func() time.Time
	heard    map[string]*heard
	silent   int    // workers silent now (dist/silent_workers)
	silences uint64 // silences begun (dist/silences)
	// maxLag is the learner's lag bound; warnedDrops, that the notice of
	// segments dropped over it was written.
	maxLag      uint64
	warnedDrops bool
	// drained counts the samples a policy's drain discarded (several
	// policies: policySetups.train).
	drained uint64
	// gather is the learner group's member, when there is a group whose
	// transport counts its recoveries and chunks (dist/gather_resends,
	// dist/gather_chunks).
	gather gatherStater
	// prior are the counts of the learner processes before this one (a
	// resumed run), which the streams of this one do not hold.
	prior distTotals
}

// totals are the run's counts so far (a checkpoint's dist/counters).
func (m *monitor) totals() distTotals {
	ss := m.smp.Stats()
	return distTotals{Counters: m.cnt, Duplicates: m.prior.Duplicates + ss.Duplicates, Shed: m.prior.Shed + ss.Shed,
		StreamErrors: m.prior.StreamErrors + ss.Malformed + ss.WrongProtocol,
		Discarded:    m.prior.Discarded + m.drained + ss.Lost, Resumes: m.prior.Resumes}
}

// gatherStater is a learner group member that counts the contributions it
// had to ask for again (transport's NATS group).
type gatherStater interface {
	GatherStats() transport.GatherStats
}

// dropWarn is the share of segments dropped for their lag above which the
// monitor writes a notice, once, after dropWarnAfter segments.
const (
	dropWarn      = 0.05
	dropWarnAfter = 20
)

// heard is what the monitor last saw of a worker's progress record.
type heard struct {
	p       transport.Progress
	at      time.Time // when the record was first seen as p
	learned uint64    // the learner's samples learned then
	step    int64     // the learner's step then
	silent  bool
}

const readEvery = 5 * time.Second

// learnerEnd is a learner's side of one run: its sample and parameter
// streams and its view of the run's members, on a transport of its own.
type learnerEnd struct {
	tr    transport.Transport
	smp   transport.SampleStream
	par   transport.ParamService
	mem   transport.Membership
	close func()
}

func (s *Setup) openLearnerEnd(ctx context.Context, newTransport func() (transport.Transport, error), run string) (learnerEnd, error) {
	tr, err := newTransport()
	if err != nil {
		return learnerEnd{}, err
	}
	_, smp, par, closeAll, err := s.roleStreams(ctx, tr, run, withParams)
	if err != nil {
		return learnerEnd{}, err
	}
	mem, err := tr.Membership(ctx, run, transport.Options{})
	if err != nil {
		closeAll()
		return learnerEnd{}, err
	}
	return learnerEnd{tr: tr, smp: smp, par: par, mem: mem, close: func() { mem.Close(); closeAll() }}, nil
}

func newMonitor(log algo.Logger, smp transport.SampleStream, mem transport.Membership, notice io.Writer, stall time.Duration) *monitor {
	if notice == nil {
		notice = os.Stderr
	}
	return &monitor{log: log, smp: smp, mem: mem, notice: notice, after: silentAfter(stall), now: time.Now, heard: map[string]*heard{}}
}

// silentAfter is how long a worker's progress record may stay unchanged
// before the learner calls it silent: a sixth of the run's stall bound
// (10 s of the default 60 s), at least 2 s. A worker saves its record
// at most every saveEvery and the learner reads it every readEvery, so a
// silence is noticed between silentAfter and silentAfter + readEvery +
// saveEvery after the worker's last sample; well before the stall bound,
// which ends the run only when no worker sends.
func silentAfter(stall time.Duration) time.Duration {
	if stall <= 0 {
		stall = DefaultStall
	}
	return max(stall/6, 2*time.Second)
}

// scalars logs the dist/… scalars (algo.DistScalars); final reads the
// workers' records whatever the time.
func (m *monitor) scalars(ctx context.Context, final bool) {
	if final || m.now().Sub(m.read) >= readEvery {
		m.read = m.now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if ps, err := m.mem.Progress(rctx); err == nil {
			m.stale, m.abandoned, m.obsBytes, m.batches, m.rows = 0, 0, 0, 0, 0
			m.rowsP50, m.rowsP99, m.latP50, m.latP99 = 0, 0, 0, 0
			for _, p := range ps {
				m.stale += p.FetchFailed
				m.abandoned += p.Abandoned
				m.obsBytes += p.InferObsBytes
				m.batches += p.Batches
				m.rows += p.BatchRows
				m.rowsP50, m.rowsP99 = max(m.rowsP50, p.BatchRowsP50), max(m.rowsP99, p.BatchRowsP99)
				m.latP50, m.latP99 = max(m.latP50, p.LatencyP50us), max(m.latP99, p.LatencyP99us)
			}
			if !final { // the workers have stopped by the final read
				m.watch(rctx, ps)
			}
		}
		cancel()
	}
	ss := m.smp.Stats()
	m.log.Scalar("dist/lag_mean", m.cnt.LagMean())
	m.log.Scalar("dist/lag_max", float64(m.cnt.LagMax))
	m.log.Scalar("dist/dropped", float64(m.cnt.Dropped))
	if seen := m.cnt.Learned + m.cnt.Dropped; !m.warnedDrops && seen >= dropWarnAfter && float64(m.cnt.Dropped) > dropWarn*float64(seen) {
		m.warnedDrops = true
		fmt.Fprintf(m.notice, "%sdist: %d of %d segments (%.0f%%) dropped as older than max_policy_lag %d versions; raise runtime.max_policy_lag or run fewer env workers per learner\n",
			m.who, m.cnt.Dropped, seen, 100*float64(m.cnt.Dropped)/float64(seen), m.maxLag)
	}
	tot := m.totals()
	m.log.Scalar("dist/duplicates", float64(tot.Duplicates+m.cnt.PeerDuplicates))
	discarded := tot.Discarded
	if final { // acknowledged, queued, and the learner has stopped
		discarded += ss.Queued
	}
	m.log.Scalar("dist/discarded", float64(discarded))
	m.log.Scalar("dist/shed", float64(tot.Shed))
	m.log.Scalar("dist/decode_errors", float64(m.cnt.DecodeErrors+tot.StreamErrors+m.cnt.PeerStreamErrors))
	m.log.Scalar("dist/stale_weights", float64(m.stale))
	m.log.Scalar("dist/abandoned", float64(m.abandoned))
	m.log.Scalar("dist/infer_obs_bytes", float64(m.obsBytes))
	rowsMean := 0.0
	if m.batches > 0 {
		rowsMean = float64(m.rows) / float64(m.batches)
	}
	m.log.Scalar("dist/batch_rows_mean", rowsMean)
	m.log.Scalar("dist/batch_rows_p50", float64(m.rowsP50))
	m.log.Scalar("dist/batch_rows_p99", float64(m.rowsP99))
	m.log.Scalar("dist/infer_latency_p50_ms", float64(m.latP50)/1e3)
	m.log.Scalar("dist/infer_latency_p99_ms", float64(m.latP99)/1e3)
	m.log.Scalar("dist/silent_workers", float64(m.silent))
	m.log.Scalar("dist/silences", float64(m.silences))
	var gs transport.GatherStats
	if m.gather != nil {
		gs = m.gather.GatherStats()
	}
	m.log.Scalar("dist/gather_resends", float64(gs.Requests))
	m.log.Scalar("dist/gather_chunks", float64(gs.ChunksSent+gs.ChunksReceived))
	m.log.Scalar("dist/params_checks", float64(m.cnt.ParamChecks))
	m.log.Scalar("dist/resumes", float64(m.prior.Resumes))
}

// silentSamples is how many samples per env worker the learner must have
// learned from the others since an env worker's record last changed
// before that worker counts as silent: a learner that is merely slow
// (each push waits for it) takes every worker's samples in turn, so a
// worker it has not heard from over several rounds is not just queued.
const silentSamples = 4

// watch compares the workers' progress records ps with what it saw
// before and writes a notice when a worker goes silent or comes back.
// An env worker's record changes with every sample the learner takes
// from it; it is silent when its record has not changed for m.after
// while the learner took silentSamples × env workers samples from the
// others. A policy worker's record changes only when it answers, which
// a healthy idle one need not, so it counts as silent only when it has
// also lost its registration (no keep-alive for a TTL).
func (m *monitor) watch(ctx context.Context, ps map[string]transport.Progress) {
	now := m.now()
	names := make([]string, 0, len(ps))
	envs := uint64(0)
	for name := range ps {
		names = append(names, name)
		if strings.HasPrefix(name, "env-") {
			envs++
		}
	}
	slices.Sort(names)
	var registered map[string]bool // read once, when needed
	for _, name := range names {
		p := ps[name]
		h := m.heard[name]
		if h == nil || h.p != p {
			if h != nil && h.silent {
				m.silent--
				fmt.Fprintf(m.notice, "dist: %s%s back after %s (silent since step %d; now step %d)\n", m.who, name, seconds(now.Sub(h.at)), h.step, m.step)
			}
			m.heard[name] = &heard{p: p, at: now, learned: m.cnt.Learned, step: m.step}
			continue
		}
		if h.silent || now.Sub(h.at) < m.after {
			continue
		}
		if strings.HasPrefix(name, "env-") {
			if m.cnt.Learned-h.learned < silentSamples*envs {
				continue
			}
		} else {
			if registered == nil {
				registered = map[string]bool{}
				ms, err := m.mem.Members(ctx)
				if err != nil || !workersRegister(ms) {
					// Unknown, or a run whose workers do not register
					// (goroutines of one process): no notice.
					registered = nil
					continue
				}
				for _, x := range ms {
					registered[x.Name] = true
				}
			}
			if registered[name] {
				continue
			}
		}
		h.silent = true
		m.silent++
		m.silences++
		what := "answer"
		if strings.HasPrefix(name, "env-") {
			what = "sample"
		}
		fmt.Fprintf(m.notice, "dist: %s%s silent for %s (last %s at step %d; %d samples learned since); %s\n",
			m.who, name, seconds(now.Sub(h.at)), what, h.step, m.cnt.Learned-h.learned, m.alive(ctx))
	}
}

// seconds rounds d to whole seconds for a notice.
func seconds(d time.Duration) string { return d.Round(time.Second).String() }

// alive says which workers are registered, for the watchdog's error.
func (m *monitor) alive(ctx context.Context) string {
	ms, err := m.mem.Members(ctx)
	if err != nil {
		return fmt.Sprintf("workers alive: unknown (%v)", err)
	}
	var env, other []string
	for _, x := range ms {
		if strings.HasPrefix(x.Name, "env-") {
			env = append(env, x.Name)
		} else {
			other = append(other, x.Name)
		}
	}
	return fmt.Sprintf("env workers alive: %s; other members: %s", list(env), list(other))
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// trainOff runs the off-policy learner here, checkpointed by cp when
// saving, with its versions from minV; ws are the other roles, stopped at
// the end. A checkpoint is taken after a sample is learned and before the
// next pull, as on-policy, and when the run is stopped (ctx): the learner
// finishes the sample under way (worker.RunOffLearner) and is saved at its
// step. A sample the stream queued (OffCapacity) is acknowledged and not
// yet pulled, so a crash or a stop loses it and the restarted learner
// counts it in dist/discarded.
func (s *Setup) trainOff(ctx, wctx context.Context, rt *algo.Runtime, smp transport.SampleStream, par transport.ParamService, mon *monitor, stall time.Duration,
	group *worker.LearnerGroup, ws *workers, cp *checkpointer, saving bool, minV uint64) (algo.Model, error) {
	var resume func(algo.TransitionLearner, algo.Replay) (int64, error)
	if saving {
		resume = cp.startOff(s.Pieces)
	}
	l, err := worker.RunOffLearner(wctx, worker.OffLearnerConfig{Steps: rt.Header.Steps, StepsPerSample: s.Off.ChunkSteps,
		PublishEvery: s.Off.PublishEvery, Stall: stall, Alive: mon.alive, Counters: &mon.cnt, Group: group,
		Start: resume, MinVersion: minV,
		OnSample: func(step int64, tr *sample.Transitions, stats []algo.Stat) {
			// Episodes are logged at the end of the sample they ended in.
			for _, e := range tr.Episodes {
				rt.Log.Episode(step, e.Return, e.Length)
			}
			for _, st := range stats {
				rt.Log.Scalar(st.Name, st.Value)
			}
			mon.step = step
			mon.scalars(wctx, false)
			rt.Log.Step(step)
			cp.step, cp.it = step, cp.it+1
			if ck := rt.Checkpoints; ck != nil && ck.Due(step) && step < rt.Header.Steps {
				if serr := cp.save(); serr != nil {
					ws.fail(serr)
				}
			}
		}}, s.Pieces, smp, par)
	werr := ws.wait()
	mon.scalars(ctx, true)
	// Stopped between two samples (RunOffLearner returns the stop's error
	// only there); a diverged run keeps no checkpoint of its non-finite
	// parameters.
	interrupted := ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.Is(context.Cause(ctx), algo.ErrDiverged)
	if (err == nil || interrupted) && werr == nil {
		if serr := cp.save(); serr != nil {
			if interrupted {
				// Not context.Canceled: a stop whose checkpoint was not
				// written is no clean interruption (exit status 1, not 130).
				serr = fmt.Errorf("dist: stopped at step %d, and its checkpoint was not saved: %v", cp.step, serr)
			}
			err = serr
		}
	}
	return learnerModel(l, werr, err, "the learner")
}

// paramsOf returns the parameter list of the run's model (for decoding
// weights off the wire): the initial version's tensors.
func paramsOf(pieces *algo.Pieces) ([]*nn.Param, error) {
	l, err := pieces.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	if c, ok := l.(interface{ Close() error }); ok {
		defer c.Close()
	}
	v := l.Weights()
	ps := make([]*nn.Param, v.Len())
	for i := range ps {
		ps[i] = v.Param(i)
	}
	return ps, nil
}

// transportMaker returns a maker of transports, one per role: the shared
// in-process world, or a new NATS connection each (to an embedded server
// started here unless opt.NATSURL names one).
func transportMaker(opt Options) (func() (transport.Transport, error), func(), error) {
	switch opt.Transport {
	case "", "inproc":
		ip := transport.NewInproc()
		return func() (transport.Transport, error) { return ip, nil }, func() {}, nil
	case "nats":
	default:
		return nil, nil, fmt.Errorf("%w: runtime.transport %q is not inproc or nats", ErrConfig, opt.Transport)
	}
	url := opt.NATSURL
	var srv *transport.Server
	if url == "" {
		s, err := transport.StartServer(transport.ServerOptions{Generate: true})
		if err != nil {
			return nil, nil, err
		}
		srv, url = s, s.AuthURL()
	}
	var conns []*nats.Conn
	closeAll := func() {
		for _, nc := range conns {
			nc.Close()
		}
		if srv != nil {
			srv.Shutdown()
		}
	}
	return func() (transport.Transport, error) {
		nc, err := nats.Connect(url, nats.Name("herd"), nats.MaxReconnects(-1))
		if err != nil {
			return nil, fmt.Errorf("distexec: connect to the NATS server %s: %w", redact.URL(url), redact.URLError(err, url))
		}
		conns = append(conns, nc)
		return transport.NewNATS(nc)
	}, closeAll, nil
}

// workers runs a run's in-process worker goroutines, each on a transport of
// its own: the first to fail stops the others, and wait joins what they
// returned.
type workers struct {
	ctx          context.Context
	stop         context.CancelFunc
	wg           sync.WaitGroup
	newTransport func() (transport.Transport, error)

	mu  sync.Mutex
	err error
}

func newWorkers(ctx context.Context, newTransport func() (transport.Transport, error)) *workers {
	w := &workers{newTransport: newTransport}
	w.ctx, w.stop = context.WithCancel(ctx)
	return w
}

// fail records err and stops the other workers; errors that come after the
// stop are its echoes and are left out.
func (w *workers) fail(err error) {
	if err != nil && w.ctx.Err() == nil {
		w.mu.Lock()
		w.err = errors.Join(w.err, err)
		w.mu.Unlock()
		w.stop()
	}
}

// start runs f on a new transport in a goroutine of its own.
func (w *workers) start(f func(tr transport.Transport) error) error {
	tr, err := w.newTransport()
	if err != nil {
		return err
	}
	w.wg.Go(func() { w.fail(f(tr)) })
	return nil
}

// wait stops every worker, waits for them and returns their errors.
func (w *workers) wait() error {
	w.stop()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
