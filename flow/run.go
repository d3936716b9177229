package flow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"herd/algo"
	"herd/sample"
	"herd/transport"
)

// ErrConfig marks a plan that cannot run with the given settings; it wraps
// algo.ErrConfig.
var ErrConfig = fmt.Errorf("%w: flow", algo.ErrConfig)

// Planner is implemented by the configs of algorithms written as plans:
// Plan builds the algorithm's dataflow on r and returns the stream of its
// reports. Nothing runs until Train pulls the stream.
type Planner interface {
	Plan(r *Run) (Iter[Report], error)
}

// Report is what a training step tells StandardMetricsReporting: the env
// steps it accounts for, the episodes that ended in them and the
// learner's scalars.
type Report struct {
	// Steps are the env steps (summed over envs) of the samples behind it.
	Steps int64
	// Episodes ended in those samples; At is the number of env steps into
	// the report's Steps at which each ended (1…Steps).
	Episodes []sample.Episode
	// Stats are the learner's scalars (names from the Spec's Scalars).
	Stats []algo.Stat
}

// Run is what a plan is built from: the run's header, the algorithm's
// pieces for the env's spaces, and the bookkeeping of the operators (the
// env-step budget, the model to save, the actors to stop). Train makes one
// per run; a plan only passes it to operators.
type Run struct {
	// Ctx ends the run: cancelled when Train returns or the caller stops.
	Ctx    context.Context
	Header algo.Header
	Pieces *algo.Pieces
	Spaces algo.Spaces

	rt    *algo.Runtime
	model algo.Model
	// learning is held while a replay sub-flow updates the model (Replay),
	// which may run on a goroutine other than the one that logs; the
	// divergence guard reads the parameters under it.
	learning sync.Mutex
	budget   atomic.Int64 // env steps rollout workers may still take
	total    atomic.Int64 // the budget before any claim
	round    int64        // SetBudget's unit, a synchronous plan's round (0: none)
	// numAsyncRead: the plan asked for runtime.num_async (NumAsync), so
	// the setting is not silently ignored.
	numAsyncRead bool
	steps        int64 // env steps reported so far
	lagMax       float64
	closers      []func()
	remote       *remote // workers over a transport (nil: in-process)
	sets         int     // worker sets made

	// Checkpoints (checkpoint.go): outer is the caller's context, whose
	// cancellation stops the plan after a report with a checkpoint.
	outer   context.Context
	ck      *algo.Checkpoints // nil: none taken
	parts   []part
	noCk    string // why the plan's state cannot be saved ("": it can)
	gathers int    // gathers registered
	wanted  bool   // a checkpoint is due, waiting for every part to be ready
	// resumeStep is the step of the checkpoint being restored; restarted
	// counts the envs its restore restarted (their state not saved).
	resumeStep int64
	restarted  int
}

// Train runs the plan of cfg (a Planner) with spec's pieces: the flow
// executor, with algo.Executor's contract. It pulls the plan's reports
// until the stream ends (the rollout workers have spent the step budget and
// every sample was learned) and returns the learner's model.
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
	return trainPlan(ctx, rt, spec, cfg, nil, nil)
}

// WithTrain returns spec, given a Train that runs its plan in this process
// (Train) when it has none of its own: an algorithm that is a dataflow
// plan (algo.CanPlan), as the local executor runs it (run.Local).
func WithTrain(spec algo.Spec) algo.Spec {
	if spec.Train == nil {
		spec.Train = func(ctx context.Context, rt *algo.Runtime, cfg algo.Config) (algo.Model, error) {
			return Train(ctx, rt, spec, cfg)
		}
	}
	return spec
}

// TrainPlan is Train with a plan of the caller's (a custom plan over an
// algorithm's pieces: cfg configures spec's pieces, p builds the plan).
// Train and TrainServed run PlanOf's.
func TrainPlan(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, p Planner) (algo.Model, error) {
	return trainPlan(ctx, rt, spec, cfg, p, nil)
}

// TrainServed is Train for a driver whose workers are served elsewhere
// (ServeWorker, in other processes): calls is the driver's end of the
// run's actor calls; worker k of the plan's first worker set must be
// served as ActorName(k). The driver waits for each worker's first reply
// within its context. A worker lost later (its process killed and started
// again) is rejoined: see the package doc, "Restarts". whoServes, when not
// nil, names the start of the process that serves an actor now (herd
// launch: the worker's process id, from its registration; "" when none is
// registered); while a call waits, the driver checks it every second, and
// a new name means the worker that had the call was lost.
func TrainServed(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, calls transport.CallStream, whoServes func(ctx context.Context, actor string) (string, error)) (algo.Model, error) {
	if calls == nil {
		return nil, fmt.Errorf("%w: TrainServed needs a call stream", ErrConfig)
	}
	return trainPlan(ctx, rt, spec, cfg, nil, &remote{calls: calls, counts: []func() transport.Stats{calls.Stats}, whoServes: whoServes})
}

func trainPlan(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, p Planner, served *remote) (algo.Model, error) {
	h := rt.Header
	if spec.Pieces == nil {
		return nil, fmt.Errorf("%w: algorithm %s has no pieces", ErrConfig, spec.Name)
	}
	if t := h.Runtime.Transport; t != "" && t != "inproc" && t != "nats" {
		return nil, fmt.Errorf("%w: transport %q is not inproc or nats", ErrConfig, t)
	}
	e, err := h.Envs.Make(h.Env)
	if err != nil {
		return nil, err
	}
	sp := algo.SpacesOf(e)
	e.Close()
	pieces, err := spec.Pieces(h, cfg, sp)
	if err != nil {
		return nil, err
	}
	custom := p != nil
	if p == nil {
		if p, err = PlanOf(cfg, pieces); err != nil {
			return nil, fmt.Errorf("%w (algorithm %s)", err, spec.Name)
		}
	}
	outer := ctx
	if rt.Checkpoints != nil {
		// The plan stops between reports, at a checkpoint, not inside
		// an update or a segment (afterReport).
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Run{Ctx: ctx, Header: h, Pieces: pieces, Spaces: sp, rt: rt, outer: outer}
	if custom {
		r.noCheckpoints("a plan of the caller's (TrainPlan) saves no training state")
	}
	r.budget.Store(h.Steps)
	r.total.Store(h.Steps)
	defer r.close()
	defer cancel() // before close: a stopped actor may be waiting on ctx
	switch {
	case served != nil:
		r.remote = served
	case h.Runtime.Transport == "nats":
		if r.remote, err = startNATS(ctx, r, h.Runtime.NATSURL); err != nil {
			return nil, err
		}
		r.onClose(r.remote.close)
	}
	it, err := p.Plan(r)
	if err != nil {
		return r.model, err
	}
	if h.Runtime.NumAsync != 0 && !r.numAsyncRead {
		return r.model, fmt.Errorf("%w: runtime.num_async: the %s plan has no synchronous rounds to collect ahead (A2C and PPO do)", ErrConfig, spec.Name)
	}
	if err := r.setUpCheckpoints(); err != nil {
		return r.model, err
	}
	if r.ck == nil && rt.Checkpoints != nil {
		// Checkpoints off after all: the caller's cancellation stops the
		// plan where it is, as without them.
		defer context.AfterFunc(outer, cancel)()
	}
	for _, err := range it {
		if err != nil {
			if (ctx.Err() != nil || outer.Err() != nil) && errors.Is(err, context.Canceled) {
				return r.model, err
			}
			// Cancelled before the stream unwinds: a branch of the plan
			// still waiting (on a worker's item, on UnionAsync's other
			// input, on a ledger bound) must stop for the union to end.
			cancel()
			return r.model, fmt.Errorf("flow: %s: %w", spec.Name, err)
		}
	}
	if r.ck != nil {
		if err := r.checkpoint(); err != nil {
			return r.model, err
		}
	}
	return r.model, nil
}

// newWorkerSet numbers a plan's set of workers (their actors' names).
func (r *Run) newWorkerSet() int {
	r.sets++
	return r.sets - 1
}

// NumAsync is runtime.num_async, the rounds a synchronous plan keeps
// requested (GatherSyncAhead): 1 unless the config sets more. A plan that
// sets none of its rounds ahead does not call it, and Train then refuses
// the setting.
func (r *Run) NumAsync() int {
	r.numAsyncRead = true
	return max(1, r.Header.Runtime.NumAsync)
}

// Steps returns the env steps reported so far.
func (r *Run) Steps() int64 { return r.steps }

// SetBudget rounds the run's env-step budget down to a multiple of unit
// (a synchronous plan's round: every worker's segment), so that no round
// is cut short.
func (r *Run) SetBudget(unit int64) {
	if unit > 0 {
		r.budget.Store(r.Header.Steps / unit * unit)
		r.total.Store(r.Header.Steps / unit * unit)
		r.round = unit
	}
}

// RoundBudget rounds the run's env-step budget down to a multiple of unit
// (the algorithm's rollout of num_envs × num_steps, as the CLI announces)
// for an asynchronous plan, whose workers claim their items first come,
// first served: the run then takes at most that many steps, exactly that
// many when every worker's item is the same size.
func (r *Run) RoundBudget(unit int64) {
	if unit > 0 {
		r.budget.Store(r.Header.Steps / unit * unit)
		r.total.Store(r.Header.Steps / unit * unit)
	}
}

// claimItem is claim for a worker's item number made (from 0), of n env
// steps. Under a synchronous plan (SetBudget) the workers' items number
// made form round made, which runs whole or not at all: the item is
// allowed when the round fits the budget, whatever order the workers
// claim in — also when one worker is rounds ahead of another
// (GatherSyncAhead), where first come, first served would cut a round
// short. Under GatherSync both rules give the same answer.
func (r *Run) claimItem(made, n int64) bool {
	if r.round > 0 {
		return (made+1)*r.round <= r.total.Load()
	}
	return r.claim(n)
}

// claim takes n env steps from the budget; false when fewer are left.
func (r *Run) claim(n int64) bool {
	_, ok := r.claimAt(n)
	return ok
}

// claimAt is claim that also returns the global step the claimed steps
// start at (for exploration schedules).
func (r *Run) claimAt(n int64) (int64, bool) {
	for {
		b := r.budget.Load()
		if b < n {
			return 0, false
		}
		if r.budget.CompareAndSwap(b, b-n) {
			return r.total.Load() - b, true
		}
	}
}

// track records the learner's model (saved at the end, watched for
// divergence).
func (r *Run) track(m algo.Model) {
	r.model = m
	if pm, ok := m.(algo.ParamModel); ok {
		m = lockedModel{pm, &r.learning}
	}
	r.rt.Track(m)
}

// lockedModel is the model as the divergence guard sees it: a ParamModel
// whose parameters it reads under Run.learning (algo.ParamModel).
type lockedModel struct {
	algo.ParamModel
	sync.Locker
}

// onClose registers f to run when Train returns (after the context is
// cancelled), last registered first.
func (r *Run) onClose(f func()) { r.closers = append(r.closers, f) }

func (r *Run) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// StandardMetricsReporting logs every report into the run's metrics
// (metrics.csv, summary.json and the progress bar, through the Runtime's
// Logger): its episodes at the global steps they ended, its scalars, and
// the global step. A plan that reports charts/policy_lag also gets
// charts/policy_lag_max, the largest so far (its last value is
// summary.json's policy_lag_max).
func StandardMetricsReporting(r *Run, it Iter[Report]) Iter[Report] {
	return ForEach(it, func(rep Report) (Report, error) {
		for _, e := range rep.Episodes {
			r.rt.Log.Episode(r.steps+int64(e.At), e.Return, e.Length)
		}
		r.steps += rep.Steps
		for _, s := range rep.Stats {
			r.rt.Log.Scalar(s.Name, s.Value)
			if s.Name == "charts/policy_lag" {
				r.lagMax = max(r.lagMax, s.Value)
				r.rt.Log.Scalar("charts/policy_lag_max", r.lagMax)
			}
		}
		if r.remote != nil {
			st := r.remote.stats()
			r.rt.Log.Scalar("dist/duplicates", float64(st.Duplicates))
			r.rt.Log.Scalar("dist/decode_errors", float64(st.Malformed+st.WrongProtocol))
			r.rt.Log.Scalar("dist/restarts", float64(r.remote.restarts.Load()))
			r.rt.Log.Scalar("dist/reissued", float64(r.remote.reissued.Load()))
		}
		r.rt.Log.Step(r.steps)
		return rep, r.afterReport()
	})
}
