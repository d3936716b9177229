package pal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

// ErrConfig marks an unusable PAL setup; it wraps algo.ErrConfig.
var ErrConfig = fmt.Errorf("%w: pal", algo.ErrConfig)

// Defaults of the options.
const (
	DefaultMaxLag = 256
	// MaxLearners bounds M (each learner holds a copy of every network).
	MaxLearners = 256
)

// Options are the executor's settings (the runtime: section).
type Options struct {
	// Actors is N, the number of actors (env worker + policy copy), each
	// stepping the algorithm's num_envs envs. Default 1.
	Actors int
	// Learners is M, the number of learners (default 1). With M > 1 the
	// learners compute gradients and a parameter service applies them
	// (see LearnerMode and the package doc).
	Learners int
	// LearnerMode is how M > 1 learners combine: ModeAsync (the default)
	// or ModeSync.
	LearnerMode string
	// SyncBatch is how sync learners share an update's minibatch of B
	// rows: SyncSplit (the default, B/M rows each: the algorithm's own
	// batch) or SyncFull (B rows each: an effective batch of M·B).
	SyncBatch string
	// UpdateInterval is U, env steps per learner update; when set it must
	// equal the algorithm's (the learner's schedule is in env steps, so
	// the replay ratio is the algorithm's by construction).
	UpdateInterval float64
	// RefreshEvery is the number of an actor's env steps between looks at
	// the parameter service. Default 1.
	RefreshEvery int
	// PublishEvery is the number of learner updates between published
	// weight versions. Default 1.
	PublishEvery int
	// MaxLag is how many env steps the actors may take beyond those the
	// learner has consumed before they park. Default DefaultMaxLag.
	MaxLag int
	// NoLearn turns the learner off: actors run free (the rate limiter
	// does not hold them) and nothing is learned. herd tune measures
	// actor throughput f_a with it.
	NoLearn bool
	// Stats, if not nil, receives the run's counts and wall clock.
	Stats *Stats
}

// Stats are what a PAL run did.
type Stats struct {
	// EnvSteps and Updates count env steps taken and learner updates made
	// (minibatch gradients: Updates·batch_size samples were drawn).
	EnvSteps int64
	Updates  uint64
	// Applies counts the parameter service's applied updates: Updates with
	// M > 1 learners in either mode (a sync round is one update; an update
	// in phases, algo.Phaser, counts once), 0 with one.
	Applies uint64
	// Counts are the learner's optimizer steps (critic, actor) and target
	// updates: the single-process algorithm's for the same env steps, in
	// every mode.
	Counts algo.UpdateCounts
	// MaxStale and MeanStale are how many updates were applied between the
	// state an async learner computed a gradient at and the gradient's own
	// apply (bounded by M−1; 0 with one learner or in sync mode).
	MaxStale  uint64
	MeanStale float64
	// Versions counts the weight versions published.
	Versions int
	// Wall is the time from the first env step to the last update.
	Wall time.Duration
	// ActorWait is the total time actors spent parked by the rate limiter.
	ActorWait time.Duration
}

// OptionsOf reads the executor's options from a run header.
func OptionsOf(h algo.Header) Options {
	rc := h.Runtime
	return Options{Actors: rc.Actors, Learners: rc.Learners, LearnerMode: rc.LearnerMode, SyncBatch: rc.SyncBatch, UpdateInterval: rc.UpdateInterval,
		RefreshEvery: rc.RefreshEvery, PublishEvery: rc.PublishEvery, MaxLag: rc.MaxLag}
}

// Train runs spec's off-policy pieces under PAL for rt.Header.Steps env
// steps and returns the final model. See the package doc.
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	if err := algo.Admit(Executor(), h, spec, rt.Others); err != nil {
		return nil, err
	}
	shape, ok := cfg.(algo.TransitionShape)
	if !ok || spec.Pieces == nil {
		return nil, algo.Undeclared(spec, algo.CanTransitionLearner, "its config has no transition shape or it has no pieces")
	}
	numEnvs, u := shape.TransitionShape()
	if opt.Actors == 0 {
		opt.Actors = 1
	}
	if opt.Learners == 0 {
		opt.Learners = 1
	}
	if opt.RefreshEvery == 0 {
		opt.RefreshEvery = 1
	}
	if opt.PublishEvery == 0 {
		opt.PublishEvery = 1
	}
	if opt.MaxLag == 0 {
		opt.MaxLag = DefaultMaxLag
	}
	var errs []error
	if opt.Actors < 1 || opt.RefreshEvery < 1 || opt.PublishEvery < 1 || opt.MaxLag < 1 || numEnvs < 1 {
		errs = append(errs, fmt.Errorf("%w: actors %d, refresh_every %d, publish_every %d, max_lag %d, num_envs %d must all be ≥ 1",
			ErrConfig, opt.Actors, opt.RefreshEvery, opt.PublishEvery, opt.MaxLag, numEnvs))
	}
	if opt.LearnerMode == "" {
		opt.LearnerMode = ModeAsync
	}
	if opt.Learners < 1 || opt.Learners > MaxLearners {
		errs = append(errs, fmt.Errorf("%w: learners %d must be in [1, %d]", ErrConfig, opt.Learners, MaxLearners))
	}
	if opt.LearnerMode != ModeAsync && opt.LearnerMode != ModeSync {
		errs = append(errs, fmt.Errorf("%w: learner_mode %q is not %s or %s", ErrConfig, opt.LearnerMode, ModeAsync, ModeSync))
	}
	if opt.SyncBatch == "" {
		opt.SyncBatch = SyncSplit
	}
	if opt.SyncBatch != SyncSplit && opt.SyncBatch != SyncFull {
		errs = append(errs, fmt.Errorf("%w: sync_batch %q is not %s or %s", ErrConfig, opt.SyncBatch, SyncSplit, SyncFull))
	}
	if opt.UpdateInterval != 0 && opt.UpdateInterval != u {
		errs = append(errs, fmt.Errorf("%w: update_interval %v differs from %s's %v env steps per update: the learner's schedule is the algorithm's (DQN: train_frequency / gradient_steps); set those instead",
			ErrConfig, opt.UpdateInterval, spec.Name, u))
	}
	if h.Steps%int64(numEnvs) != 0 {
		errs = append(errs, fmt.Errorf("%w: steps %d is not a multiple of num_envs %d", ErrConfig, h.Steps, numEnvs))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	vecs := make([]env.Vector, opt.Actors)
	defer func() {
		for _, v := range vecs {
			if v != nil {
				v.Close()
			}
		}
	}()
	for i := range vecs {
		v, err := h.Envs.MakeVector(h.Env, numEnvs, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			return nil, err
		}
		vecs[i] = v
	}
	pieces, err := spec.Pieces(h, cfg, algo.SpacesOf(vecs[0]))
	if err != nil {
		return nil, err
	}
	if pieces.NewTransitionLearner == nil {
		return nil, algo.Undeclared(spec, algo.CanTransitionLearner, "its pieces have no transition learner")
	}
	learner, err := pieces.NewTransitionLearner()
	if err != nil {
		return nil, err
	}
	defer learner.Close()
	mod, ok := learner.(algo.Modeler)
	if !ok {
		return nil, algo.Undeclared(spec, algo.CanTransitionLearner, "its learner cannot hand out its model (algo.Modeler)")
	}
	rt.Track(mod.Model()) // divergence guard (algo.TrainRun)
	rb, err := pieces.NewReplay()
	if err != nil {
		return nil, err
	}
	fork, ok := rb.(algo.ForkReplay)
	if !ok {
		return nil, algo.Undeclared(spec, algo.CanTransitionLearner, "its replay cannot be shared between goroutines (algo.ForkReplay)")
	}

	store := weights.NewStore(learner.Weights())
	log := &lockedLog{l: rt.Log}
	actors := make([]*actor, opt.Actors)
	for i := range actors {
		a, err := newActor(i, h.Seed, vecs[i], pieces, fork.Fork(), store, opt.RefreshEvery)
		if err != nil {
			return nil, err
		}
		actors[i] = a
	}

	lim := newLimiter(h.Steps, int64(opt.MaxLag), opt.NoLearn)
	ck := rt.Checkpoints
	switch {
	case ck == nil:
	case opt.NoLearn:
		ck.Disable("a run without a learner saves no training state")
		ck = nil
	}
	cp, err := newCheckpointer(ck, pieces, learner, rb, actors)
	if err != nil {
		return nil, err
	}
	var from int64
	versions := 0
	if cp != nil && ck.Restored() != nil {
		if from, versions, err = cp.restore(ck.Restored()); err != nil {
			return nil, fmt.Errorf("pal: resume from step %d: %w", ck.Restored().Header.Step, err)
		}
		if v := learner.Weights(); v.N > store.Latest().N {
			if err := store.Publish(v); err != nil {
				return nil, err
			}
		}
		restarted := 0
		for _, a := range actors {
			if err := a.policy.SetWeights(store.Latest()); err != nil {
				return nil, err
			}
			if !a.restored {
				// Envs whose state is not saved start new episodes, with
				// seeds of their own for this resumption.
				a.resetSeed = int64((rng.Derive(h.Seed, "pal-resume-reset", a.id) ^ uint64(from)) & (1<<63 - 1))
				restarted += a.n
			}
		}
		if restarted > 0 {
			ck.RestartEnvs(restarted)
		}
		lim.reserved, lim.committed, lim.consumed = from, from, from
	}
	var svc *service
	if opt.Learners > 1 && !opt.NoLearn {
		split, ok := learner.(algo.SplitLearner)
		if !ok {
			return nil, algo.Undeclared(spec, algo.CanGradApply, "its learner is no algo.SplitLearner")
		}
		wp, err := workerPieces(h, spec, cfg, algo.SpacesOf(vecs[0]), pieces, opt)
		if err != nil {
			return nil, err
		}
		if svc, err = newService(lim, split, wp, fork, rb, store, opt, log); err != nil {
			return nil, err
		}
		defer svc.close()
		if cp != nil {
			if err := cp.addLearners(wp, svc.workers); err != nil {
				return nil, err
			}
			svc.cp, svc.res = cp, learnResult{last: from, versions: versions}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, lim.wake) // parked goroutines see the cancellation
	defer stop()

	// The envs are reset here rather than by each actor, so that a
	// checkpoint (taken while an actor may not have started) finds every
	// actor's envs between two steps.
	for _, a := range actors {
		if err := a.start(); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	actorErrs := make([]error, len(actors))
	for i, a := range actors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.run(ctx, lim, log); err != nil {
				actorErrs[i] = err
				cancel()
			}
		}()
	}
	var res learnResult
	var ll *learnLoop
	switch {
	case opt.NoLearn:
	case svc != nil:
		res = svc.run(ctx)
	default:
		ll = newLearnLoop(lim, learner, rb, store, opt.PublishEvery, log, cp, from, versions)
		res = ll.run(ctx)
	}
	if res.err != nil {
		cancel()
	}
	wg.Wait()
	switch {
	case cp != nil && svc != nil:
		err := svc.finish(ctx, res.err, actorErrs)
		res = svc.res
		res.err = err
	case cp != nil:
		err := ll.finish(ctx, res.err, actorErrs)
		res = ll.res
		res.err = err
	}
	wall := time.Since(t0)
	if opt.NoLearn {
		lim.mu.Lock()
		res.last = lim.committed
		lim.mu.Unlock()
	}
	if s := opt.Stats; s != nil {
		lim.mu.Lock()
		*s = Stats{EnvSteps: lim.committed, Updates: learner.Weights().N, Versions: res.versions, Wall: wall, ActorWait: lim.waited}
		if c, ok := learner.(algo.UpdateCounter); ok {
			s.Counts = c.UpdateCounts()
		}
		if svc != nil {
			s.Applies, s.MaxStale = svc.applies, svc.staleMax
			if svc.applies > 0 {
				s.MeanStale = float64(svc.staleSum) / float64(svc.applies)
			}
		}
		lim.mu.Unlock()
	}
	log.Step(res.last)
	// The first failure, not the cancellations it caused in the others.
	for _, err := range append([]error{res.err}, actorErrs...) {
		if err != nil && !errors.Is(err, context.Canceled) {
			return mod.Model(), err
		}
	}
	return mod.Model(), ctx.Err()
}

// workerPieces returns the pieces the M gradient learners are built from:
// the run's, except that sync learners splitting one update's minibatch
// (sync_batch: split) get the algorithm's with batch_size B/M.
func workerPieces(h algo.Header, spec algo.Spec, cfg algo.Config, sp algo.Spaces, pieces *algo.Pieces, opt Options) (*algo.Pieces, error) {
	if opt.LearnerMode != ModeSync || opt.SyncBatch == SyncFull {
		return pieces, nil
	}
	mb, ok := cfg.(algo.Minibatcher)
	if !ok {
		return nil, fmt.Errorf("%w: learner_mode sync: %s's minibatch cannot be split (set sync_batch: full)", ErrConfig, spec.Name)
	}
	if b := mb.Minibatch(); b%opt.Learners != 0 {
		return nil, fmt.Errorf("%w: learner_mode sync: batch_size %d is not a multiple of learners %d (set sync_batch: full for %d rows each)",
			ErrConfig, b, opt.Learners, b)
	}
	return spec.Pieces(h, mb.WithMinibatch(mb.Minibatch()/opt.Learners), sp)
}

// limiter is the rate limiter between actors and the learner, and the
// global env-step counter. Actors reserve env steps (never more than the
// run's total, never more than maxLag beyond what the learner has
// consumed), step, store the transitions and then commit them; the learner
// consumes what was committed. Both sides park on one sync.Cond.
type limiter struct {
	mu        sync.Mutex
	cond      *sync.Cond
	total     int64
	maxLag    int64
	free      bool  // no learner: actors are never held back
	reserved  int64 // env steps handed to actors
	committed int64 // env steps whose transitions are in the replay
	consumed  int64 // env steps the learner has run the updates of
	inflight  int   // actors between reserve and commit
	done      bool  // cancelled: everyone returns
	held      bool  // a checkpoint is being taken: no new reservations
	waited    time.Duration
}

func newLimiter(total, maxLag int64, free bool) *limiter {
	l := &limiter{total: total, maxLag: maxLag, free: free}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// wake releases every parked goroutine for good (cancellation).
func (l *limiter) wake() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
	l.cond.Broadcast()
}

// reserve hands an actor n env steps and returns the global step they
// start at; ok is false when the run's steps are all handed out or it was
// cancelled.
func (l *limiter) reserve(n int64) (start int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var t0 time.Time
	for !l.done && l.reserved+n <= l.total && (l.held || !l.free && l.reserved-l.consumed >= l.maxLag) {
		if t0.IsZero() {
			t0 = time.Now()
		}
		l.cond.Wait()
	}
	if !t0.IsZero() {
		l.waited += time.Since(t0)
	}
	if l.done || l.reserved+n > l.total {
		return 0, false
	}
	start = l.reserved
	l.reserved += n
	l.inflight++
	return start, true
}

// drain stops new reservations and waits until no actor holds one; it
// returns the committed steps (all those reserved), ok false on
// cancellation. release ends the hold.
func (l *limiter) drain() (step int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = true
	for !l.done && l.inflight > 0 {
		l.cond.Wait()
	}
	return l.committed, !l.done
}

// settle readies the limiter for the learner's last pass once every
// actor has returned: the run ends at the steps committed, and the
// learner's next hands them out even after a cancellation.
func (l *limiter) settle() {
	l.mu.Lock()
	l.done, l.total = false, l.committed
	l.mu.Unlock()
}

func (l *limiter) release() {
	l.mu.Lock()
	l.held = false
	l.mu.Unlock()
	l.cond.Broadcast()
}

// commit records that n reserved steps are in the replay.
func (l *limiter) commit(n int64) {
	l.mu.Lock()
	l.committed += n
	l.inflight--
	l.mu.Unlock()
	l.cond.Broadcast()
}

// next parks the learner until steps beyond prev are committed and returns
// the committed count; ok is false once every step is consumed or on
// cancellation. Steps committed out of order are safe to consume: their
// transitions are in the replay.
func (l *limiter) next(prev int64) (step int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.done && l.committed == prev && prev < l.total {
		l.cond.Wait()
	}
	if l.done || prev >= l.total {
		return prev, false
	}
	return l.committed, true
}

// poll is next without parking: ok is false when nothing beyond prev is
// committed (or the run was cancelled).
func (l *limiter) poll(prev int64) (step int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || l.committed == prev {
		return prev, false
	}
	return l.committed, true
}

// consume records that the learner ran the updates due up to step.
func (l *limiter) consume(step int64) {
	l.mu.Lock()
	l.consumed = step
	l.mu.Unlock()
	l.cond.Broadcast()
}

// actor is an env worker with an inline policy copy: the one off-policy
// env-step loop, fed by the limiter's steps and storing into the shared
// replay.
type actor struct {
	id      int
	seed    uint64
	n       int
	loop    *rollout.Transitions
	policy  algo.PolicyNet
	rb      algo.Replay
	prio    algo.Prioritizer // nil: transitions enter at the max priority
	store   *weights.Store
	refresh int
	tr      sample.Transitions
	// stream is the sampler's random stream (a checkpoint saves it).
	stream *rand.PCG
	// resetSeed seeds the envs' first reset (every env of every actor
	// gets its own).
	resetSeed int64
	// envs, sampler and asm are what a checkpoint saves of the actor's
	// envs (checkpointer.saveActor); restored: the envs continue from a
	// checkpoint and are not reset.
	envs     env.Vector
	sampler  algo.Sampler
	asm      algo.Assembler
	restored bool
}

func newActor(id int, seed uint64, envs env.Vector, p *algo.Pieces, rb algo.Replay, store *weights.Store, refresh int) (*actor, error) {
	pol, err := p.NewPolicy()
	if err != nil {
		return nil, err
	}
	n := envs.NumEnvs()
	stream := rng.Source(seed, "env-worker", id)
	s, err := p.NewSampler(n, rand.New(stream))
	if err != nil {
		return nil, err
	}
	asm, err := p.NewAssembler(n)
	if err != nil {
		return nil, err
	}
	var prio algo.Prioritizer
	if p.NewPrioritizer != nil {
		if prio, err = p.NewPrioritizer(); err != nil {
			return nil, err
		}
	}
	loop, err := rollout.NewTransitions(envs, rollout.NewInline(pol, s), asm)
	if err != nil {
		return nil, err
	}
	return &actor{id: id, seed: seed, n: n, loop: loop, policy: pol, rb: rb, prio: prio, store: store, refresh: refresh,
		stream: stream, resetSeed: int64((seed + uint64(id*n)) & (1<<63 - 1)), envs: envs, sampler: s, asm: asm}, nil
}

// start resets the envs, unless they were restored from a checkpoint.
func (a *actor) start() error {
	if a.restored {
		return nil
	}
	if err := a.loop.Reset(a.resetSeed); err != nil {
		return fmt.Errorf("pal: actor %d: %w", a.id, err)
	}
	return nil
}

// run steps the envs (start) until the limiter hands out no more steps.
func (a *actor) run(ctx context.Context, lim *limiter, log algo.Logger) error {
	var sinceRefresh int
	for {
		start, ok := lim.reserve(int64(a.n))
		if !ok {
			return ctx.Err()
		}
		if sinceRefresh >= a.refresh {
			sinceRefresh = 0
			if v := a.store.Latest(); v.N != a.policy.Version() {
				if err := a.policy.SetWeights(v); err != nil {
					return fmt.Errorf("pal: actor %d: %w", a.id, err)
				}
			}
		}
		rollout.ClearTransitions(&a.tr)
		if err := a.loop.Step(start, &a.tr); err != nil {
			return fmt.Errorf("pal: actor %d: %w", a.id, err)
		}
		if a.prio != nil {
			// Ape-X: priorities from this actor's own (possibly stale)
			// copy, so the learner spends no time on them.
			if err := a.prio.Prioritize(&a.tr, a.policy); err != nil {
				return fmt.Errorf("pal: actor %d: %w", a.id, err)
			}
		}
		if err := a.rb.Add(&a.tr); err != nil {
			return fmt.Errorf("pal: actor %d: store: %w", a.id, err)
		}
		for _, e := range a.tr.Episodes {
			log.Episode(start+int64(a.n), e.Return, e.Length)
		}
		sinceRefresh += a.n
		lim.commit(int64(a.n))
	}
}

type learnResult struct {
	last     int64 // env steps consumed
	versions int
	err      error
}

// learnLoop is the one learner's side of a run (M = 1): it runs the
// updates as env steps are committed, publishes a weight version every
// publishEvery updates, and takes the run's checkpoints (cp, nil: none).
type learnLoop struct {
	lim          *limiter
	l            algo.TransitionLearner
	rb           algo.Replay
	store        *weights.Store
	publishEvery int
	log          algo.Logger
	cp           *checkpointer
	published    uint64
	res          learnResult
}

func newLearnLoop(lim *limiter, l algo.TransitionLearner, rb algo.Replay, store *weights.Store, publishEvery int, log algo.Logger, cp *checkpointer, from int64, versions int) *learnLoop {
	return &learnLoop{lim: lim, l: l, rb: rb, store: store, publishEvery: publishEvery, log: log, cp: cp,
		published: store.Latest().N, res: learnResult{last: from, versions: versions}}
}

// run learns until every step is consumed or ctx ends; it takes each
// periodic checkpoint between two updates, with the actors held.
func (ll *learnLoop) run(ctx context.Context) learnResult {
	learnCtx := ctx
	if ll.cp != nil {
		// Updates finish once begun, so that the interruption's
		// checkpoint (finish) starts from the last step learned whole.
		learnCtx = context.WithoutCancel(ctx)
	}
	for {
		// ctx's end reaches the limiter (wake) from another goroutine; the
		// learner stops at once, so the actors stop within max_lag.
		if err := ctx.Err(); err != nil {
			ll.res.err = err
			return ll.res
		}
		step, ok := ll.lim.next(ll.res.last)
		if !ok {
			if err := ctx.Err(); err != nil {
				ll.res.err = err
			}
			return ll.res
		}
		if err := ll.advance(learnCtx, step); err != nil {
			ll.res.err = err
			ll.lim.wake()
			return ll.res
		}
		if ll.cp != nil && ll.cp.ck.Due(step) && step < ll.lim.total {
			if err := ll.checkpoint(learnCtx); err != nil {
				ll.res.err = err
				ll.lim.wake()
				return ll.res
			}
		}
	}
}

// finish takes the checkpoint of the run's end, or of its interruption,
// once every actor has returned (so every step reserved is committed): it
// learns up to the last committed step and saves. A run that failed or
// diverged keeps its last checkpoint. It returns the run's error err, or
// the save's.
func (ll *learnLoop) finish(ctx context.Context, err error, actorErrs []error) error {
	if keepLast(ctx, err, actorErrs) {
		return err
	}
	ll.lim.mu.Lock()
	step := ll.lim.committed
	ll.lim.mu.Unlock()
	if step > ll.res.last {
		if aerr := ll.advance(context.WithoutCancel(ctx), step); aerr != nil {
			return aerr
		}
	}
	if serr := ll.cp.save(step, ll.res.versions); serr != nil && err == nil {
		return serr
	}
	return err
}

// keepLast reports whether a run that ended with err (the learner's) and
// actorErrs saves no checkpoint of its end: it failed, or diverged.
func keepLast(ctx context.Context, err error, actorErrs []error) bool {
	for _, e := range append([]error{err}, actorErrs...) {
		if e != nil && !errors.Is(e, context.Canceled) {
			return true
		}
	}
	return errors.Is(context.Cause(ctx), algo.ErrDiverged)
}

// checkpoint holds the actors, waits for those stepping to commit, learns
// up to every committed step and saves: a quiescent point, where every
// step handed out is in the replay and learned from. It then releases the
// actors.
func (ll *learnLoop) checkpoint(ctx context.Context) error {
	step, ok := ll.lim.drain()
	defer ll.lim.release()
	if !ok {
		return context.Canceled // the run was stopped while held: finish saves it
	}
	if step > ll.res.last {
		if err := ll.advance(ctx, step); err != nil {
			return err
		}
	}
	return ll.cp.save(step, ll.res.versions)
}

// advance runs the updates due for the env steps (res.last, step].
func (ll *learnLoop) advance(ctx context.Context, step int64) error {
	stats, err := ll.l.Learn(ctx, ll.rb, ll.res.last, step)
	if err != nil {
		return err
	}
	ll.res.last = step
	for _, s := range stats {
		ll.log.Scalar(s.Name, s.Value)
	}
	if len(stats) > 0 {
		if v := ll.l.Weights(); v.N >= ll.published+uint64(ll.publishEvery) {
			if err := ll.store.Publish(v); err != nil {
				return err
			}
			ll.published = v.N
			ll.res.versions++
		}
	}
	ll.lim.consume(step)
	ll.log.Step(step)
	return nil
}

// lockedLog makes a Logger safe for the actors and the learner together.
type lockedLog struct {
	mu sync.Mutex
	l  algo.Logger
}

func (g *lockedLog) Episode(step int64, ret float64, length int) {
	g.mu.Lock()
	g.l.Episode(step, ret, length)
	g.mu.Unlock()
}

func (g *lockedLog) Scalar(name string, v float64) {
	g.mu.Lock()
	g.l.Scalar(name, v)
	g.mu.Unlock()
}

func (g *lockedLog) Step(step int64) {
	g.mu.Lock()
	g.l.Step(step)
	g.mu.Unlock()
}
