package pal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"herd/algo"
	"herd/weights"
)

// Learner modes (runtime.learner_mode) for M > 1.
const (
	// ModeAsync: each learner computes the gradients of every M-th update
	// at the newest state when the update is handed to it; the parameter
	// service applies them one by one in update order (round-robin by
	// learner id).
	ModeAsync = "async"
	// ModeSync: data-parallel updates. The M learners compute one
	// update's gradient side by side at one state, each on its share of
	// the minibatch; the service averages them in learner-id order and
	// applies the average once, as one update.
	ModeSync = "sync"
)

// How sync learners share an update's minibatch (runtime.sync_batch).
const (
	// SyncSplit: B/M rows each, so an update sees the algorithm's B rows.
	SyncSplit = "split"
	// SyncFull: B rows each, an effective batch of M·B rows per update.
	SyncFull = "full"
)

// gradJob is one update handed to a gradient learner, with the state to
// compute it at.
type gradJob struct {
	t     algo.Ticket
	state *weights.Version
}

// gradResult is a gradient learner's answer: its own buffer, filled.
type gradResult struct {
	g   *algo.Grad
	err error
}

// gradLearner is one of the M learners: a SplitLearner on slot id with
// its own fork of the replay and its own gradient buffer. Its goroutine
// takes jobs from in and answers on out until ctx ends or in closes.
type gradLearner struct {
	id  int
	l   algo.SplitLearner
	rb  algo.Replay
	g   *algo.Grad
	in  chan gradJob
	out chan gradResult
	cur *weights.Version // the state l holds
}

func (w *gradLearner) run(ctx context.Context) {
	for {
		var job gradJob
		select {
		case <-ctx.Done():
			return
		case j, ok := <-w.in:
			if !ok {
				return
			}
			job = j
		}
		var err error
		if job.state != w.cur {
			if err = w.l.SetState(job.state); err == nil {
				w.cur = job.state
			}
		}
		if err == nil {
			err = w.l.Grad(ctx, w.rb, job.t, w.g)
		}
		if err != nil {
			err = fmt.Errorf("pal: learner %d: %w", w.id, err)
		}
		// out has room for the one answer the service waits for.
		w.out <- gradResult{g: w.g, err: err}
	}
}

// service is the parameter service of M > 1 learners: it turns the
// committed env steps into the algorithm's updates (tickets), hands them
// to the gradient learners, applies their gradients to main in update
// order, and publishes main's state (for the learners) and policy weights
// (for the actors).
type service struct {
	lim          *limiter
	main         algo.SplitLearner
	rb           algo.Replay // the service's fork (Due looks at its length)
	store        *weights.Store
	publishEvery int
	log          algo.Logger
	workers      []*gradLearner
	syncMode     bool

	state   *weights.Version // main's state after the last apply
	applied uint64           // updates applied (main's counter)
	applies uint64           // Apply calls
	// staleMax and staleSum: updates applied between the state a gradient
	// was computed at and its own apply (async).
	staleMax, staleSum uint64
	published          uint64
	res                learnResult
	cp                 *checkpointer // nil: no checkpoints
	avg                *algo.Grad    // sync: the average of a round
	grads              []*algo.Grad
}

// newService builds the M gradient learners (slots 0 … M−1, each with
// its own fork of the replay).
func newService(lim *limiter, main algo.SplitLearner, p *algo.Pieces, fork algo.ForkReplay, rb algo.Replay,
	store *weights.Store, opt Options, log algo.Logger) (*service, error) {
	s := &service{lim: lim, main: main, rb: rb, store: store, publishEvery: opt.PublishEvery, log: log,
		syncMode: opt.LearnerMode == ModeSync, state: main.State(), published: store.Latest().N}
	s.applied = s.state.N
	for i := range opt.Learners {
		l, err := p.NewTransitionLearner()
		if err != nil {
			s.close()
			return nil, err
		}
		sl, ok := l.(algo.SplitLearner)
		if !ok {
			l.Close()
			s.close()
			return nil, fmt.Errorf("%w: the learner cannot split its updates into gradient and apply steps", ErrConfig)
		}
		sl.SetSlot(i)
		s.workers = append(s.workers, &gradLearner{id: i, l: sl, rb: fork.Fork(), g: sl.NewGrad(),
			in: make(chan gradJob), out: make(chan gradResult, 1)})
	}
	s.avg = main.NewGrad()
	s.grads = make([]*algo.Grad, len(s.workers))
	return s, nil
}

func (s *service) close() {
	for _, w := range s.workers {
		w.l.Close()
	}
}

// run starts the gradient learners, serves until every step is consumed
// or ctx ends, and stops them again. With checkpoints, the updates handed
// out when ctx ends are still applied (as learnLoop's finish once begun),
// so that the interruption's checkpoint (finish) starts from whole
// updates.
func (s *service) run(ctx context.Context) learnResult {
	if s.cp != nil {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx)
		}()
	}
	var err error
	if s.syncMode {
		err = s.serveSync(ctx)
	} else {
		err = s.serveAsync(ctx)
	}
	cancel()
	wg.Wait()
	if err != nil {
		s.res.err = err
		s.lim.wake()
	}
	return s.res
}

// apply applies g, one phase of an update, to main and publishes the new
// state; after the update's last phase it logs the update's scalars, and
// publishes the policy every publishEvery updates.
func (s *service) apply(g *algo.Grad) error {
	stats, err := s.main.Apply(g)
	if err != nil {
		return err
	}
	if g.Phase == 0 {
		s.applied += uint64(g.N)
		s.applies++
	}
	s.state = s.main.State()
	if g.Phase < algo.Phases(s.main, g.Ticket)-1 {
		return nil
	}
	for _, st := range stats {
		s.log.Scalar(st.Name, st.Value)
	}
	if s.applied >= s.published+uint64(s.publishEvery) {
		if err := s.store.Publish(s.main.Weights()); err != nil {
			return err
		}
		s.published = s.applied
		s.res.versions++
	}
	return nil
}

// await returns worker w's answer, or ctx's error.
func await(ctx context.Context, w *gradLearner) (*algo.Grad, error) {
	select {
	case r := <-w.out:
		return r.g, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send hands job to w, or returns ctx's error.
func send(ctx context.Context, w *gradLearner, job gradJob) error {
	select {
	case w.in <- job:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mark is an absorbed env step and the number of the last update due up
// to it: the step is consumed once that update is applied.
type mark struct {
	step int64
	last uint64
	n    int // the replay's length when the steps' updates were due
}

// fixedLen is a replay whose Len is the one Due saw, so that Advance
// decides as Due did.
type fixedLen struct {
	algo.Replay
	n int
}

func (r fixedLen) Len() int { return r.n }

// advance takes main's updates keyed to env steps (prev, step] (see
// algo.Advancer), with the replay length n Due saw for them.
func (s *service) advance(prev, step int64, n int) error {
	if a, ok := s.main.(algo.Advancer); ok {
		if err := a.Advance(fixedLen{s.rb, n}, prev, step); err != nil {
			return err
		}
		s.state = s.main.State()
	}
	return nil
}

// asyncQueue is serveAsync's bookkeeping: the updates due and not handed
// out, those handed out and not applied, and the env steps absorbed and
// not yet consumed.
type asyncQueue struct {
	pending  []algo.Ticket // due, not handed out
	inflight []algo.Ticket // handed out, not applied; oldest first
	at       []uint64      // the state (updates applied) each in-flight one is computed at
	marks    []mark
	free     []bool
	next     uint64 // the number of the next update due
	last     int64  // the last env step absorbed
}

// idle reports whether every update due is applied.
func (q *asyncQueue) idle() bool { return len(q.pending) == 0 && len(q.inflight) == 0 }

// serveAsync runs the asynchronous learners. Update k (numbered from 1)
// goes to learner (k−1) mod M, which has one gradient buffer: it gets
// update k only once its update k−M is applied, at the state of that
// moment, which has at least k−M updates applied in total — update k's
// gradient is at most M−1 updates stale. Gradients are applied strictly in
// update order, so the apply order is the same in every run; the
// staleness of each is not (it depends on which learner finishes first).
// An update's later phases (algo.Phaser: the actor's gradient after the
// critic step) go to the learner of its phase 0 at the state that phase's
// apply left, before the next update is applied. Env steps are consumed
// (releasing actors) once all their updates are applied.
func (s *service) serveAsync(ctx context.Context) error {
	q := &asyncQueue{free: make([]bool, len(s.workers)), next: s.applied + 1, last: s.res.last}
	for i := range q.free {
		q.free[i] = true
	}
	// learnTo runs every update due up to step (a checkpoint's).
	learnTo := func(step int64) error {
		if step > q.last {
			s.absorb(q, step)
		}
		for !q.idle() {
			if err := s.stepAsync(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		if q.idle() {
			step, ok := s.lim.next(q.last)
			if !ok {
				return ctx.Err()
			}
			s.absorb(q, step)
		} else if step, ok := s.lim.poll(q.last); ok {
			s.absorb(q, step)
		}
		if err := s.stepAsync(ctx, q); err != nil {
			return err
		}
		if err := s.checkpoint(learnTo); err != nil {
			return err
		}
	}
}

// absorb turns the env steps (q.last, step] into updates due.
func (s *service) absorb(q *asyncQueue, step int64) {
	n, rl := len(q.pending), s.rb.Len()
	q.pending = s.main.Due(q.pending, fixedLen{s.rb, rl}, q.last, step, q.next)
	q.next += uint64(len(q.pending) - n)
	q.last = step
	q.marks = append(q.marks, mark{step: step, last: q.next - 1, n: rl})
}

// stepAsync hands the pending updates to the learners that are free,
// applies the oldest in-flight one when its gradient comes, and consumes
// the env steps whose updates are all applied.
func (s *service) stepAsync(ctx context.Context, q *asyncQueue) error {
	M := uint64(len(s.workers))
	for len(q.pending) > 0 {
		w := s.workers[(q.pending[0].Index-1)%M]
		if !q.free[w.id] {
			break
		}
		if err := send(ctx, w, gradJob{t: q.pending[0], state: s.state}); err != nil {
			return err
		}
		q.free[w.id] = false
		q.inflight = append(q.inflight, q.pending[0])
		q.at = append(q.at, s.state.N)
		q.pending = q.pending[1:]
	}
	if len(q.inflight) > 0 {
		w := s.workers[(q.inflight[0].Index-1)%M]
		g, err := await(ctx, w)
		if err != nil {
			return err
		}
		stale := s.applied - q.at[0]
		s.staleMax = max(s.staleMax, stale)
		s.staleSum += stale
		if err := s.apply(g); err != nil {
			return err
		}
		// The update's later phases (an actor gradient after the
		// critic step) go to the same learner, which holds the
		// minibatch, at the state that apply left: none of them is
		// stale. The other learners go on with their updates.
		t := q.inflight[0]
		for t.Phase = 1; t.Phase < algo.Phases(s.main, t); t.Phase++ {
			if err := send(ctx, w, gradJob{t: t, state: s.state}); err != nil {
				return err
			}
			g, err := await(ctx, w)
			if err != nil {
				return err
			}
			if err := s.apply(g); err != nil {
				return err
			}
		}
		q.free[w.id] = true
		q.inflight, q.at = q.inflight[1:], q.at[1:]
	}
	i, prev := 0, s.res.last
	for ; i < len(q.marks) && q.marks[i].last <= s.applied; i++ {
		if err := s.advance(prev, q.marks[i].step, q.marks[i].n); err != nil {
			return err
		}
		prev = q.marks[i].step
	}
	if i > 0 {
		s.res.last = q.marks[i-1].step
		s.lim.consume(s.res.last)
		s.log.Step(s.res.last)
		q.marks = q.marks[:copy(q.marks, q.marks[i:])]
	}
	return nil
}

// checkpoint takes the periodic checkpoint once it is due: it holds the
// actors, waits for those stepping to commit, runs every update due up
// to the committed steps with learnTo (a quiescent point: nothing due is
// unapplied, no gradient is in flight), saves and releases the actors.
func (s *service) checkpoint(learnTo func(step int64) error) error {
	if s.cp == nil || !s.cp.ck.Due(s.res.last) || s.res.last >= s.lim.total {
		return nil
	}
	step, ok := s.lim.drain()
	defer s.lim.release()
	if !ok {
		return nil // stopped while held: finish saves
	}
	if err := learnTo(step); err != nil {
		return err
	}
	return s.cp.save(step, s.res.versions)
}

// finish takes the checkpoint of the run's end, or of its interruption,
// once every actor has returned: it runs the learners again over the
// steps committed and not yet learned, and saves. See learnLoop.finish.
func (s *service) finish(ctx context.Context, err error, actorErrs []error) error {
	if keepLast(ctx, err, actorErrs) {
		return err
	}
	s.lim.settle()
	if r := s.run(context.WithoutCancel(ctx)); r.err != nil {
		return r.err
	}
	if serr := s.cp.save(s.res.last, s.res.versions); serr != nil && err == nil {
		return serr
	}
	return err
}

// serveSync runs the synchronous learners: every update of the
// algorithm's schedule is one round, in which all M learners compute its
// gradient side by side at the current state, each on its own share of
// the minibatch (its slot's stream); the gradients are averaged in
// learner-id order and applied once, as one update (phase by phase, see
// round). So the updates, the
// optimizer steps, the target updates and every schedule keyed to the
// update number (TD3's policy delay) are the single-process algorithm's.
// Env steps are consumed once their updates are applied.
func (s *service) serveSync(ctx context.Context) error {
	var pending []algo.Ticket
	next := s.applied + 1
	learnTo := func(step int64) error {
		if step == s.res.last {
			return nil
		}
		rl := s.rb.Len()
		pending = s.main.Due(pending[:0], fixedLen{s.rb, rl}, s.res.last, step, next)
		next += uint64(len(pending))
		for _, t := range pending {
			if err := s.round(ctx, t); err != nil {
				return err
			}
		}
		if err := s.advance(s.res.last, step, rl); err != nil {
			return err
		}
		s.res.last = step
		s.lim.consume(step)
		s.log.Step(step)
		return nil
	}
	for {
		step, ok := s.lim.next(s.res.last)
		if !ok {
			return ctx.Err()
		}
		if err := learnTo(step); err != nil {
			return err
		}
		if err := s.checkpoint(learnTo); err != nil {
			return err
		}
	}
}

// round computes update t's gradient on every learner at the current
// state, averages them in learner-id order and applies the average as one
// update; phase by phase, each at the state the previous phase's apply
// left (algo.Phaser).
func (s *service) round(ctx context.Context, t algo.Ticket) error {
	for t.Phase = 0; t.Phase < algo.Phases(s.main, t); t.Phase++ {
		if err := s.phase(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// phase is one phase of a round.
func (s *service) phase(ctx context.Context, t algo.Ticket) error {
	for _, w := range s.workers {
		if err := send(ctx, w, gradJob{t: t, state: s.state}); err != nil {
			return err
		}
	}
	var errs []error
	for i, w := range s.workers {
		g, err := await(ctx, w)
		if err != nil {
			errs = append(errs, err)
		}
		s.grads[i] = g
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := algo.AverageGrads(s.avg, s.grads); err != nil {
		return err
	}
	// The shares of one update make one gradient: one update, and each
	// part carried once.
	s.avg.N = 1
	for i, n := range s.avg.Has {
		s.avg.Has[i] = min(n, 1)
	}
	return s.apply(s.avg)
}
