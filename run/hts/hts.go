package hts

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/scratch"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

// ErrConfig marks an unusable HTS setup; it wraps algo.ErrConfig.
var ErrConfig = fmt.Errorf("%w: hts", algo.ErrConfig)

// Options are the executor's counts (the runtime: section).
type Options struct {
	// EnvWorkers is E, the number of env workers the envs are spread
	// over (contiguous blocks). Default: one per env.
	EnvWorkers int
	// PolicyWorkers is P, the number of policy workers serving inference
	// requests. Default 1.
	PolicyWorkers int
	// Alpha is α, the steps each env takes between two batch
	// synchronizations; it is the segment length T and replaces the
	// algorithm's num_steps when set. Default: num_steps.
	Alpha int
	// StepTime, if set, makes every env step take a drawn duration
	// (env.WithStepTime); results do not change.
	StepTime *env.StepTime
	// Sync turns HTS off, for comparison: every step waits for the
	// slowest env (a barrier per step), and the learner runs between
	// segments with no lag, as synchronous A2C/PPO do.
	Sync bool
	// Timing, if not nil, receives where the wall clock went.
	Timing *Timing
}

// Timing is where an HTS run's wall clock went.
type Timing struct {
	// Collect is the time env workers spent gathering segments (from the
	// start of a segment to its barrier), over Segments segments of
	// StepsPerEnv steps each.
	Collect     time.Duration
	Segments    int
	StepsPerEnv int
	// LearnWait is the time the barrier waited for the learner after
	// collection was done (0 when learning hides behind collection).
	LearnWait time.Duration
}

// OptionsOf reads the executor's options from a run header.
func OptionsOf(h algo.Header) Options {
	rc := h.Runtime
	return Options{EnvWorkers: rc.EnvWorkers, PolicyWorkers: rc.PolicyWorkers, Alpha: rc.Alpha, StepTime: rc.StepTime}
}

// Train runs spec's pieces under HTS for rt.Header.Steps env steps and
// returns the final model. Results are bit-identical for any numbers of env
// workers and policy workers, any GOMAXPROCS and any step times: see the
// package doc for why. A run with a multiagent section trains one policy
// per id, each from its own agents' rows (see "Several policies").
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	if err := algo.Admit(Executor(), h, spec, rt.Others); err != nil {
		return nil, err
	}
	shape, ok := cfg.(algo.Rollout)
	if !ok || spec.Pieces == nil {
		return nil, algo.Undeclared(spec, algo.CanSegmentLearner, "its config has no rollout shape or it has no pieces")
	}
	numEnvs, T, _ := shape.RolloutShape()
	if opt.Alpha > 0 && opt.Alpha != T {
		// The learner plans its learning-rate schedule and batch shapes
		// on num_steps, so α is num_steps, written once.
		return nil, fmt.Errorf("%w: alpha %d differs from the algorithm's num_steps %d: α is the segment length; set num_steps", ErrConfig, opt.Alpha, T)
	}
	defaultE := opt.EnvWorkers == 0
	if defaultE {
		opt.EnvWorkers = numEnvs
	}
	if opt.PolicyWorkers == 0 {
		opt.PolicyWorkers = 1
	}
	if opt.EnvWorkers < 1 || opt.EnvWorkers > numEnvs || opt.PolicyWorkers < 1 || T < 1 {
		return nil, fmt.Errorf("%w: env_workers %d (1…num_envs %d), policy_workers %d (≥ 1), alpha %d (≥ 1)",
			ErrConfig, opt.EnvWorkers, numEnvs, opt.PolicyWorkers, T)
	}
	iters := int(h.Steps / int64(numEnvs*T))
	if iters < 1 {
		return nil, fmt.Errorf("%w: steps %d is less than one segment (%d envs × alpha %d)", ErrConfig, h.Steps, numEnvs, T)
	}

	// Envs, one per slot i, each with its own seed and its own sampler
	// stream ("env-worker", i): slots, not workers, own the randomness, so
	// spreading the envs over more or fewer workers changes nothing. A
	// multi-agent env's slot is one env of A agent rows (a FlatVector of
	// one env, as the local executor's rows): the slot steps when all A
	// rows have their actions, and each row has its own sampler stream
	// ("env-worker", row).
	agentsPerSlot := 1
	var agents []string
	if h.Envs.IsParallel(h.Env) {
		pe, err := h.Envs.MakeParallel(h.Env)
		if err != nil {
			return nil, err
		}
		agents = slices.Clone(pe.PossibleAgents())
		agentsPerSlot = len(agents)
		pe.Close()
		if numEnvs%agentsPerSlot != 0 {
			return nil, fmt.Errorf("%w: num_envs %d counts agent rows; %s has %d agents per env", ErrConfig, numEnvs, h.Env, agentsPerSlot)
		}
		if opt.StepTime != nil {
			return nil, fmt.Errorf("%w: step_time is not available for a multi-agent env (%s)", ErrConfig, h.Env)
		}
	}
	slots := numEnvs / agentsPerSlot
	if defaultE {
		opt.EnvWorkers = slots
	}
	if opt.EnvWorkers > slots {
		return nil, fmt.Errorf("%w: env_workers %d > %d envs (%d rows of %d agents)", ErrConfig, opt.EnvWorkers, slots, numEnvs, agentsPerSlot)
	}
	mkOpts := []env.Option{env.WithEpisodeStatistics()}
	if opt.StepTime != nil {
		mkOpts = append(mkOpts, env.WithStepTime(*opt.StepTime))
	}
	var envs []env.Env
	var groups []env.Vector
	owned := false // by the env workers' vectors
	defer func() {
		if owned {
			return
		}
		for _, e := range envs {
			if e != nil {
				e.Close()
			}
		}
		for _, g := range groups {
			if g != nil {
				g.Close()
			}
		}
	}()
	var spaces algo.Spaces
	of := make([]int, agentsPerSlot) // policy of each agent of a slot
	var policyActs []env.Space       // each policy's action space, with a multiagent section
	if agents != nil && h.MultiAgent.Enabled() {
		var err error
		if _, of, policyActs, err = h.MultiAgent.PolicyAgents(h.Envs, h.Env); err != nil {
			return nil, err
		}
		// Each policy acts with a network of its own agents' action
		// space.
		mkOpts = append(mkOpts, env.WithAgentActionSpaces())
	}
	if agents != nil {
		groups = make([]env.Vector, slots)
		for i := range groups {
			g, err := h.Envs.MakeVector(h.Env, agentsPerSlot, env.Sync, mkOpts...)
			if err != nil {
				return nil, err
			}
			groups[i] = g
		}
		spaces = algo.SpacesOf(groups[0])
	} else {
		envs = make([]env.Env, numEnvs)
		for i := range envs {
			e, err := h.Envs.Make(h.Env, mkOpts...)
			if err != nil {
				return nil, err
			}
			envs[i] = e
		}
		spaces = algo.SpacesOf(envs[0])
	}

	// The policies: the run's one, or one per multiagent id, each with its
	// own pieces, learner, weights, samplers and segment storage.
	ids := []string{""}
	if ma := h.MultiAgent; ma.Enabled() {
		if agents == nil {
			return nil, fmt.Errorf("%w: multiagent needs a multi-agent env, not %s", ErrConfig, h.Env)
		}
		ids = ma.Policies
	}
	// Checkpoints (algo.Checkpoints) at barriers: see checkpointer.
	cks := rt.Checkpoints
	var cp *checkpointer
	pols := make([]*policy, len(ids))
	for k, id := range ids {
		p := &policy{}
		for _, pk := range of {
			if pk == k {
				p.perSlot++
			}
		}
		p.n = slots * p.perSlot
		hk, sk, ck := h, spec, cfg
		if id != "" {
			p.prefix = "policy/" + id + "/"
			var err error
			if hk, sk, ck, err = algo.PolicyRun(h, spec, cfg, rt.Others, k, p.perSlot, agentsPerSlot); err != nil {
				return nil, err
			}
			// Policy k's budget is its rows' share of whole segments.
			hk.Steps = int64(iters * T * p.n)
			sh, ok := ck.(algo.Rollout)
			if !ok || sk.Pieces == nil {
				return nil, algo.Undeclared(sk, algo.CanSegmentLearner, "its config has no rollout shape or it has no pieces")
			}
			if _, tk, _ := sh.RolloutShape(); tk != T {
				return nil, fmt.Errorf("%w: policy %s: %s.num_steps %d differs from %s.num_steps %d: every policy's segment is α steps", ErrConfig, id, sk.Name, tk, spec.Name, T)
			}
			if err := ck.Validate(hk); err != nil {
				return nil, fmt.Errorf("hts: policy %s: %w", id, err)
			}
		}
		_, _, p.gamma = ck.(algo.Rollout).RolloutShape()
		sp := spaces
		if policyActs != nil {
			sp.Act = policyActs[k]
		}
		p.actDim = sp.Act.Dim()
		pieces, err := sk.Pieces(hk, ck, sp)
		if err != nil {
			return nil, err
		}
		if pieces.NewSegmentLearner == nil {
			return nil, algo.Undeclared(sk, algo.CanSegmentLearner, "its pieces have no segment learner")
		}
		if p.learner, err = pieces.NewSegmentLearner(); err != nil {
			return nil, err
		}
		defer p.learner.Close()
		if p.mod, ok = p.learner.(algo.Modeler); !ok {
			return nil, algo.Undeclared(sk, algo.CanSegmentLearner, "its learner cannot hand out its model (algo.Modeler)")
		}
		p.samplers, p.srcs = make([]algo.Sampler, p.n), make([]*rand.PCG, p.n)
		for i := range p.samplers {
			p.srcs[i] = rng.Source(hk.Seed, "env-worker", i) // kept: a checkpoint saves its state
			if p.samplers[i], err = pieces.NewSampler(1, rand.New(p.srcs[i])); err != nil {
				return nil, err
			}
		}
		if cks != nil {
			saveEnvs := false
			err := saveable(p.learner, envs, ids[0] != "", groups != nil, opt.Sync)
			if err == nil {
				saveEnvs, err = envsSaveable(cks, envs)
			}
			if err != nil {
				if cks.Restored() != nil {
					return nil, fmt.Errorf("hts: cannot resume: %w", err)
				}
				cks.Disable(err.Error())
				cks = nil
			} else {
				cp = &checkpointer{learner: p.learner.(algo.LearnerCheckpoint), envs: envs, samplers: p.srcs,
					restart: !saveEnvs, seed: hk.Seed}
				if s := cks.Restored(); s != nil {
					// Before the policy workers start: they read the
					// store from their first request on.
					if err := cp.learner.RestoreLearner(s); err != nil {
						return nil, fmt.Errorf("hts: resume from step %d: %w", s.Header.Step, err)
					}
				}
			}
		}
		p.pieces, p.store = pieces, weights.NewStore(p.learner.Weights())
		p.learnDone = make(chan learned, 1)
		pols[k] = p
	}
	model := func() algo.Model {
		if ids[0] == "" {
			return pols[0].mod.Model()
		}
		ps := &algo.Policies{IDs: ids, Agents: agents, Of: of}
		for _, p := range pols {
			ps.Models = append(ps.Models, p.mod.Model())
		}
		return ps
	}
	rt.Track(model()) // divergence guard (algo.TrainRun)
	// actDim is a slot's row width: the widest agent's action.
	obsDim, actDim := spaces.Obs.Dim(), spaces.Act.Dim()

	// At most two requests per policy in flight per env worker (the
	// rows' and one row's bootstrap).
	inf := newInference(2 * len(pols) * opt.EnvWorkers)
	servers := make([]*server, opt.PolicyWorkers)
	for i := range servers {
		sv := &server{nets: make([]algo.PolicyNet, len(pols)), pols: pols, obsDim: obsDim}
		for k, p := range pols {
			net, err := p.pieces.NewPolicy()
			if err != nil {
				return nil, err
			}
			sv.nets[k], p.outDim = net, net.OutDim()
			if sn, ok := net.(stateNet); ok && sn.StateDim() > 0 {
				p.stateDim = sn.StateDim()
			}
		}
		servers[i] = sv
	}
	for k, p := range pols {
		if p.stateDim > 0 && len(pols) > 1 {
			return nil, fmt.Errorf("%w: policy %s is recurrent: under hts a recurrent policy is the run's only one", ErrConfig, ids[k])
		}
		p.state = make([]float32, p.n*p.stateDim)
	}
	// With checkpoints, a stop (ctx) is taken at the next barrier, where
	// the run's state is whole: the segment under way and the update in
	// flight finish first (runCtx).
	stopped := ctx
	if cks != nil {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pwg sync.WaitGroup
	for _, sv := range servers {
		pwg.Add(1)
		go func() { defer pwg.Done(); sv.serve(ctx, inf.reqs) }()
	}
	stop := func() { cancel(); pwg.Wait() }

	workers := spread(slots, opt.EnvWorkers)
	ews := make([]*envWorker, len(workers))
	var step *barrier
	if opt.Sync {
		step = newBarrier(len(workers))
	}
	rank := make([]int, agentsPerSlot) // each agent's index among its policy's agents of a slot
	seen := make([]int, len(pols))
	for a, k := range of {
		rank[a], seen[k] = seen[k], seen[k]+1
	}
	for w, sl := range workers {
		pol := &rowPolicy{inf: inf, step: step, width: actDim, pols: make([]workerPolicy, len(pols))}
		for k, p := range pols {
			lo, hi := sl[0]*p.perSlot, sl[1]*p.perSlot // policy k's rows
			pol.pols[k] = workerPolicy{lo: lo, n: p.n, outDim: p.outDim, actDim: p.actDim, stateDim: p.stateDim, state: p.state,
				samplers: p.samplers[lo:hi], act: newRequest(k, lo, hi-lo, obsDim, p.outDim, false),
				vals: newRequest(k, lo, hi-lo, obsDim, p.outDim, true), boot: newRequest(k, lo, 1, obsDim, p.outDim, true)}
		}
		for g := range sl[1] - sl[0] {
			for a, k := range of {
				pol.rows = append(pol.rows, rowRef{k: k, j: g*pols[k].perSlot + rank[a]})
			}
		}
		vec, obs, err := workerEnvs(h.Seed, sl, envs, groups)
		if err != nil {
			stop()
			return nil, err
		}
		ew := &envWorker{vec: vec, pol: pol, seg: sample.NewSegment(T, len(pol.rows), obsDim, actDim)}
		ews[w] = ew
		ew.loop = rollout.NewSegments(w, vec, pol, pols[0].gamma)
		for _, rr := range pol.rows {
			ew.loop.Gammas = append(ew.loop.Gammas, pols[rr.k].gamma)
		}
		ew.loop.Stride = 1
		ew.loop.Start(obs)
	}
	// The workers' vectors own the envs from here.
	owned = true
	defer func() {
		for _, w := range ews {
			if w != nil && w.vec != nil {
				w.vec.Close()
			}
		}
	}()

	// Two storages per policy: env workers fill segs[k%2] while the
	// learners read segs[(k-1)%2].
	for _, p := range pols {
		for i := range p.segs {
			p.segs[i] = sample.NewSegment(T, p.n, obsDim, p.actDim)
			if p.stateDim > 0 {
				p.segs[i].State = make([]float32, p.n*p.stateDim)
			}
		}
	}
	learning := false
	// finish collects every learner's update, in policy order.
	finish := func() ([]learned, bool) {
		if !learning {
			return nil, false
		}
		learning = false
		out := make([]learned, len(pols))
		for k, p := range pols {
			out[k] = <-p.learnDone
		}
		return out, true
	}
	// publish logs the updates' stats and publishes their weights.
	publish := func(res []learned) error {
		var errs []error
		for k, r := range res {
			if r.err == nil {
				for _, s := range r.stats {
					rt.Log.Scalar(pols[k].prefix+s.Name, s.Value)
				}
				r.err = pols[k].store.Publish(r.next)
			}
			errs = append(errs, r.err)
		}
		return errors.Join(errs...)
	}
	// fail stops every goroutine, the learners included, before the model
	// is handed out.
	fail := func(err error) (algo.Model, error) {
		stop()
		finish()
		return model(), err
	}
	var globalStep int64
	segs := make([]*sample.Segment, len(pols))
	first := 0
	if cp != nil {
		cp.ews, cp.state = ews, pols[0].state
		if s := cks.Restored(); s != nil {
			k, step, seg, err := cp.restore(s, pols[0].segs[0])
			if err != nil {
				stop()
				return nil, fmt.Errorf("hts: resume from step %d: %w", s.Header.Step, err)
			}
			if k >= iters {
				stop()
				return nil, fmt.Errorf("hts: resume from step %d: the checkpoint ends segment %d, past the run's %d segments", s.Header.Step, k, iters)
			}
			if cp.restart {
				cks.RestartEnvs(len(envs))
			}
			// The barrier that ended segment k, from its last part on:
			// the learner starts on segment k.
			pols[0].segs[k%2], globalStep, first = seg, step, k+1
			learning = true
			go pols[0].learn(ctx, seg)
		}
	}
	save := func(k int) error {
		sections, err := cp.save(k, globalStep, pols[0].segs[k%2])
		if err == nil {
			err = cks.Save(globalStep, sections)
		}
		if err != nil {
			return fmt.Errorf("hts: checkpoint at step %d not saved: %w", globalStep, err)
		}
		return nil
	}
	for it := first; it < iters; it++ {
		for k, p := range pols {
			segs[k] = p.segs[it%2]
			segs[k].Version = p.store.Latest().N
		}
		t0 := time.Now()
		episodes, err := collect(ctx, ews, segs, int64(it))
		t1 := time.Now()
		// Barrier: every env worker has finished its α steps. Collect the
		// learners' updates of the previous segment, publish them, and
		// hand them this segment.
		res, ok := finish()
		if tm := opt.Timing; tm != nil {
			tm.Collect += t1.Sub(t0)
			tm.LearnWait += time.Since(t1)
			tm.Segments++
			tm.StepsPerEnv = T
		}
		if ok {
			if perr := publish(res); err == nil {
				err = perr
			}
		}
		if err != nil {
			return fail(err)
		}
		for _, e := range episodes {
			rt.Log.Episode(globalStep+int64((e.At+1)*numEnvs), e.Return, e.Length)
		}
		if ids[0] != "" {
			for k, p := range pols {
				p.logEpisodes(rt.Log, episodes, k)
			}
		}
		globalStep += int64(T * numEnvs)
		learning = true
		if opt.Sync {
			// No overlap and no lag: the next segment is collected with
			// the weights learned from this one.
			for k, p := range pols {
				p.learn(ctx, segs[k])
			}
			res, _ := finish()
			if err := publish(res); err != nil {
				return fail(err)
			}
			rt.Log.Step(globalStep)
		} else {
			// The row (and the divergence guard's look at the parameters)
			// comes before the learners start writing them again.
			rt.Log.Step(globalStep)
			if cp != nil {
				// A diverged run (the guard's cancel) keeps no checkpoint
				// of its non-finite parameters. A failed write is the
				// caller's to report (Checkpoints.Err) when stopped.
				// No learner runs here (learning only marks segment it
				// as handed over next), so stopping waits for none.
				learning = false
				if err := stopped.Err(); err != nil {
					if !errors.Is(context.Cause(stopped), algo.ErrDiverged) {
						if serr := save(it); serr != nil && cks.Err() == nil {
							return fail(serr)
						}
					}
					return fail(err)
				}
				// The last barrier's checkpoint is the run's end: resumed,
				// it learns the last segment again.
				if cks.Due(globalStep) || it == iters-1 {
					if err := save(it); err != nil {
						return fail(err)
					}
				}
				learning = true
			}
			for k, p := range pols {
				go p.learn(ctx, segs[k])
			}
		}
	}
	res, _ := finish()
	stop()
	if err := publish(res); err != nil {
		return model(), err
	}
	rt.Log.Step(globalStep)
	return model(), nil
}

// learned is a learner's update of one segment.
type learned struct {
	stats []algo.Stat
	next  *weights.Version
	err   error
}

// policy is one policy's share of the run: the run's only one, or one id
// of a multiagent section, which acts for perSlot agents of every slot
// (n rows in all) and learns from their rows only.
type policy struct {
	prefix     string // "policy/<id>/", "" for the run's only policy
	perSlot, n int
	gamma      float32
	outDim     int
	actDim     int       // its agents' action space's
	stateDim   int       // a recurrent policy's state per row
	state      []float32 // n rows of stateDim: the rows' states, which the policy workers advance
	pieces     *algo.Pieces
	learner    algo.SegmentLearner
	mod        algo.Modeler
	store      *weights.Store
	samplers   []algo.Sampler // one per row: ("env-worker", row) from the policy's seed
	srcs       []*rand.PCG    // the samplers' streams
	segs       [2]*sample.Segment
	learnDone  chan learned
	episodes   algo.PolicyEpisodes
}

func (p *policy) learn(ctx context.Context, seg *sample.Segment) {
	stats, err := p.learner.Learn(ctx, seg)
	p.learnDone <- learned{stats: stats, next: p.learner.Weights(), err: err}
}

// logEpisodes logs the policy's columns (algo.PolicyScalars) when some of
// its agents' episodes ended in the segment.
func (p *policy) logEpisodes(log algo.Logger, eps []episode, k int) {
	ended := false
	for _, e := range eps {
		if e.policy != k {
			continue
		}
		p.episodes.Add(e.Return, e.Length)
		ended = true
	}
	if ended {
		p.episodes.Log(log, p.prefix)
	}
}

// episode is an ended episode of one row, and the policy that acted.
type episode struct {
	sample.Episode
	policy int
}

// spread splits n envs into w contiguous blocks [lo, hi).
func spread(n, w int) [][2]int {
	out := make([][2]int, w)
	for k := range w {
		out[k] = [2]int{k * n / w, (k + 1) * n / w}
	}
	return out
}

// collect runs every env worker for one segment (segs: one per policy)
// and returns their episodes in (step, row) order. A worker that fails
// stops the others (the synchronous baseline's barrier would wait for it).
func collect(ctx context.Context, ews []*envWorker, segs []*sample.Segment, it int64) ([]episode, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(ews))
	var wg sync.WaitGroup
	for k, w := range ews {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[k] = w.collect(ctx, segs, it); errs[k] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := joinStopped(errs); err != nil {
		return nil, err
	}
	var eps []episode
	for _, w := range ews {
		eps = append(eps, w.episodes...)
	}
	// Workers are in env order, so a stable sort by step gives (step, row).
	slices.SortStableFunc(eps, func(a, b episode) int { return a.At - b.At })
	for k, seg := range segs {
		seg.Episodes = seg.Episodes[:0]
		for _, e := range eps {
			if e.policy == k {
				seg.Episodes = append(seg.Episodes, e.Episode)
			}
		}
	}
	return eps, nil
}

// envWorker steps the envs of its slots in rollout.Segments, α steps per
// segment, with rowPolicy acting: the worker's rows are its slots' agent
// rows in (slot, agent) order, one per env for a single-agent env. Its
// segment of those rows is copied into every policy's segment at the end.
type envWorker struct {
	vec      env.Vector
	loop     *rollout.Segments
	pol      *rowPolicy
	seg      *sample.Segment
	episodes []episode
}

// collect gathers segment it of the worker's rows and writes each row
// into its policy's segment, rows lo… of segs[k].
func (w *envWorker) collect(ctx context.Context, segs []*sample.Segment, it int64) error {
	w.pol.ctx = ctx
	// The step a sampler reads is its policy's env steps (Steps counts
	// vector steps: rowPolicy scales them by each policy's rows).
	w.loop.Steps = it * int64(w.seg.T)
	if err := w.loop.Collect(w.seg); err != nil {
		return fmt.Errorf("hts: %w", err)
	}
	src, od, ad := w.seg, w.seg.ObsDim, w.seg.ActDim
	for r, rr := range w.pol.rows {
		q := &w.pol.pols[rr.k]
		dst, j, pad := segs[rr.k], q.lo+rr.j, q.actDim
		for t := range src.T {
			s, d := t*src.N+r, t*dst.N+j
			copy(dst.Obs[d*od:(d+1)*od], src.Obs[s*od:(s+1)*od])
			copy(dst.Actions[d*pad:(d+1)*pad], src.Actions[s*ad:s*ad+pad])
			dst.LogProbs[d], dst.Values[d] = src.LogProbs[s], src.Values[s]
			dst.Rewards[d], dst.Dones[d] = src.Rewards[s], src.Dones[s]
		}
		copy(dst.NextObs[j*od:(j+1)*od], src.NextObs[r*od:(r+1)*od])
		dst.LastValues[j] = src.LastValues[r]
		if sd := q.stateDim; sd > 0 {
			copy(dst.State[j*sd:(j+1)*sd], src.State[r*sd:(r+1)*sd])
		}
	}
	w.episodes = w.episodes[:0]
	for e, ep := range src.Episodes {
		w.episodes = append(w.episodes, episode{Episode: ep, policy: w.pol.rows[w.loop.Ended[e]].k})
	}
	return nil
}

// rowRef is a worker row's policy k and its index j among the worker's
// rows of that policy.
type rowRef struct{ k, j int }

// rowPolicy is an env worker's rollout.Policy: each row's observation goes
// to its policy's inference request (every request is sent before the
// first answer is awaited, so the policy workers can serve them
// together), and each row samples with its own sampler. A recurrent
// policy's states stay with the policy (workerPolicy.state), where the
// policy workers read and advance them.
type rowPolicy struct {
	ctx   context.Context // the segment's
	inf   *inference
	step  *barrier // Options.Sync: every step waits for every env worker
	rows  []rowRef
	pols  []workerPolicy
	width int // a row's action values: the widest agent's
	one   algo.Acts
}

// workerPolicy is an env worker's share of one policy: its rows from lo
// on of the policy's n.
type workerPolicy struct {
	lo, n     int
	outDim    int
	actDim    int
	stateDim  int
	state     []float32 // the policy's n rows of state (recurrent), shared by the workers
	samplers  []algo.Sampler
	act, vals *request // the worker's rows: outputs, values
	boot      *request // one row's value
}

// Act asks for every row's outputs and samples them.
func (p *rowPolicy) Act(acts *algo.Acts, obs []float32, n int, step int64) error {
	if n != len(p.rows) {
		return fmt.Errorf("hts: %d observations for %d rows", n, len(p.rows))
	}
	if p.step != nil {
		if err := p.step.wait(p.ctx); err != nil {
			return err
		}
	}
	if err := p.ask(obs, func(q *workerPolicy) *request { return q.act }); err != nil {
		return err
	}
	acts.Actions, acts.EnvActions = acts.Actions[:0], acts.EnvActions[:0]
	acts.LogProbs, acts.Values = acts.LogProbs[:0], acts.Values[:0]
	for _, rr := range p.rows {
		q := &p.pols[rr.k]
		q.samplers[rr.j].SampleTo(&p.one, q.act.out[rr.j*q.outDim:(rr.j+1)*q.outDim], 1, step*int64(q.n))
		// A row is as wide as the widest agent's action; each agent reads
		// the leading values of its own.
		acts.Actions = pad(append(acts.Actions, p.one.Actions...), p.width)
		acts.EnvActions = pad(append(acts.EnvActions, p.one.EnvActions...), p.width)
		acts.LogProbs = append(acts.LogProbs, p.one.LogProbs...)
		acts.Values = append(acts.Values, p.one.Values...)
	}
	return nil
}

// pad grows b with zeros to a multiple of width.
func pad(b []float32, width int) []float32 {
	for len(b)%width != 0 {
		b = append(b, 0)
	}
	return b
}

// ask sends each policy's request (of) with its rows of obs and waits for
// every answer.
func (p *rowPolicy) ask(obs []float32, of func(*workerPolicy) *request) error {
	od := len(obs) / len(p.rows)
	for r, rr := range p.rows {
		req := of(&p.pols[rr.k])
		copy(req.obs[rr.j*od:(rr.j+1)*od], obs[r*od:(r+1)*od])
	}
	for k := range p.pols {
		if err := p.inf.send(p.ctx, of(&p.pols[k])); err != nil {
			return err
		}
	}
	for k := range p.pols {
		if err := p.inf.wait(p.ctx, of(&p.pols[k])); err != nil {
			return err
		}
	}
	return nil
}

// Values is V(s) of every row (the segment's end).
func (p *rowPolicy) Values(dst, obs []float32, n int) ([]float32, error) {
	if n != len(p.rows) {
		return nil, fmt.Errorf("hts: values of %d observations for %d rows", n, len(p.rows))
	}
	if err := p.ask(obs, func(q *workerPolicy) *request { return q.vals }); err != nil {
		return nil, err
	}
	dst = scratch.Resize(dst, n)
	for r, rr := range p.rows {
		dst[r] = p.pols[rr.k].vals.out[rr.j]
	}
	return dst, nil
}

// RowValue is V(obs) by row i's policy, from row i's state when it has
// one (rollout.RowValuer: the truncation bootstrap).
func (p *rowPolicy) RowValue(i int, obs []float32) (float32, error) {
	rr := p.rows[i]
	q := &p.pols[rr.k]
	q.boot.row0 = q.lo + rr.j
	copy(q.boot.obs, obs)
	if err := p.inf.send(p.ctx, q.boot); err != nil {
		return 0, err
	}
	if err := p.inf.wait(p.ctx, q.boot); err != nil {
		return 0, err
	}
	return q.boot.out[0], nil
}

// ResetEnv zeroes row i's recurrent state: its episode ended.
func (p *rowPolicy) ResetEnv(i int) {
	rr := p.rows[i]
	q := &p.pols[rr.k]
	if sd := q.stateDim; sd > 0 {
		clear(q.state[(q.lo+rr.j)*sd : (q.lo+rr.j+1)*sd])
	}
}

// StateDim is a row's recurrent state (rollout.StateKeeper's part that
// Segments records); Train admits a recurrent policy only as the run's
// one policy.
func (p *rowPolicy) StateDim() int { return p.pols[0].stateDim }

// StateTo appends the rows' states to dst[:0].
func (p *rowPolicy) StateTo(dst []float32, n int) []float32 {
	dst = dst[:0]
	for _, rr := range p.rows[:n] {
		q := &p.pols[rr.k]
		dst = append(dst, q.state[(q.lo+rr.j)*q.stateDim:(q.lo+rr.j+1)*q.stateDim]...)
	}
	return dst
}

// barrier makes n goroutines wait for each other, round after round.
type barrier struct {
	mu      sync.Mutex
	n, in   int
	release chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, release: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	ch := b.release
	if b.in++; b.in == b.n {
		b.in, b.release = 0, make(chan struct{})
		close(ch)
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// request is one env worker's inference request for one policy: rows of
// observations in, rows of outputs back (one value per row where value).
// Each env worker owns its requests and reuses them.
type request struct {
	policy int
	value  bool // V(s) only: a recurrent state is read, not advanced
	row0   int  // the policy's row of the first observation (its state)
	obs    []float32
	out    []float32
	err    error
	done   chan struct{}
}

func newRequest(policy, row0, rows, obsDim, outDim int, value bool) *request {
	if value {
		outDim = 1
	}
	return &request{policy: policy, value: value, row0: row0, obs: make([]float32, rows*obsDim), out: make([]float32, rows*outDim), done: make(chan struct{}, 1)}
}

// inference is the in-process inference stream: env workers send requests,
// policy workers take whatever is pending and answer it as one batch per
// policy.
type inference struct {
	reqs chan *request
}

func newInference(capacity int) *inference { return &inference{reqs: make(chan *request, capacity)} }

func (s *inference) send(ctx context.Context, r *request) error {
	select {
	case s.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *inference) wait(ctx context.Context, r *request) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stateNet is a recurrent network whose per-env states the caller keeps
// (onpolicy's policy): any policy worker can then serve any env.
type stateNet interface {
	StateDim() int
	ForwardStateTo(dst, obs, state []float32, n int) []float32
	ValuesStateTo(dst, obs, state []float32, n int) []float32
}

// server is a policy worker: one net per policy and its batch buffers.
type server struct {
	nets            []algo.PolicyNet
	pols            []*policy
	obsDim          int
	batch, mine     []*request
	obs, out, state []float32
}

// serve answers requests until ctx ends, batching every request pending
// when it wakes, policy by policy (nets[k] is policy k's). The weights
// change only at barriers, when no request is in flight, so which worker
// answers a request, and with which others, never changes its outputs. A
// recurrent policy's requests are served in two batches, the steps (which
// advance the rows' states) and the values (which read them).
func (s *server) serve(ctx context.Context, reqs <-chan *request) {
	for {
		select {
		case r := <-reqs:
			s.batch = append(s.batch[:0], r)
		case <-ctx.Done():
			return
		}
	drain:
		for {
			select {
			case r := <-reqs:
				s.batch = append(s.batch, r)
			default:
				break drain
			}
		}
		for k, net := range s.nets {
			var err error
			if v := s.pols[k].store.Latest(); v.N != net.Version() {
				if err = net.SetWeights(v); err != nil {
					err = fmt.Errorf("hts: policy worker: %w", err)
				}
			}
			sn, _ := net.(stateNet)
			if sn != nil && sn.StateDim() == 0 {
				sn = nil
			}
			for _, value := range []bool{false, true} {
				if value && sn == nil {
					break // a stateless policy's values are its rows' last column: one batch with the steps
				}
				s.mine = s.mine[:0]
				for _, r := range s.batch {
					if r.policy == k && (r.value == value || sn == nil) {
						s.mine = append(s.mine, r)
					}
				}
				if len(s.mine) > 0 {
					s.answer(net, sn, k, value, err)
				}
			}
		}
	}
}

// answer runs one batch (s.mine) of policy k and hands out its rows.
func (s *server) answer(net algo.PolicyNet, sn stateNet, k int, value bool, err error) {
	od, w := s.obsDim, net.OutDim()
	if value {
		w = 1
	}
	sd := 0
	if sn != nil {
		sd = sn.StateDim()
	}
	state := s.pols[k].state
	s.obs, s.state = s.obs[:0], s.state[:0]
	rows := 0
	for _, r := range s.mine {
		n := len(r.obs) / od
		s.obs = append(s.obs, r.obs...)
		s.state = append(s.state, state[r.row0*sd:(r.row0+n)*sd]...)
		rows += n
	}
	if err == nil {
		s.out = scratch.Resize(s.out, rows*w)
		switch {
		case sn == nil:
			net.ForwardTo(s.out, s.obs, rows)
		case value:
			sn.ValuesStateTo(s.out, s.obs, s.state, rows)
		default:
			sn.ForwardStateTo(s.out, s.obs, s.state, rows)
		}
	}
	off := 0
	for _, r := range s.mine {
		n := len(r.obs) / od
		if r.err = err; err == nil {
			if sn == nil && r.value {
				for i := range n {
					r.out[i] = s.out[(off+i+1)*net.OutDim()-1] // on-policy rows end with V(s)
				}
			} else {
				copy(r.out, s.out[off*w:(off+n)*w])
			}
			if sn != nil && !value {
				copy(state[r.row0*sd:(r.row0+n)*sd], s.state[off*sd:(off+n)*sd])
			}
		}
		off += n
		r.done <- struct{}{}
	}
}

// joinStopped joins the env workers' errors, but reports a stop that
// reached them all (Ctrl-C: each returns the context's error) once, not
// once per worker.
func joinStopped(errs []error) error {
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
		case !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			return errors.Join(errs...)
		case first == nil:
			first = err
		}
	}
	return first
}

// workerEnvs returns the vector of the envs of slots [sl[0], sl[1]) and
// their first observations. Each slot's env is reset with its own seed
// (seed, "hts/env", slot), so spreading the slots over workers changes
// nothing; a multi-agent slot is a vector of its agents' rows (groups),
// and the worker's slots are joined into one vector.
func workerEnvs(seed uint64, sl [2]int, envs []env.Env, groups []env.Vector) (env.Vector, []float32, error) {
	var obs []float32
	if groups == nil {
		for i := sl[0]; i < sl[1]; i++ {
			o, _, err := envs[i].Reset(int64(rng.Derive(seed, "hts/env", i) >> 1))
			if err != nil {
				return nil, nil, fmt.Errorf("hts: reset env %d: %w", i, err)
			}
			obs = append(obs, o...)
		}
		v, err := env.NewSyncVectorOf(envs[sl[0]:sl[1]])
		return v, obs, err
	}
	for i := sl[0]; i < sl[1]; i++ {
		b, err := groups[i].Reset(int64(rng.Derive(seed, "hts/env", i) >> 1))
		if err != nil {
			return nil, nil, fmt.Errorf("hts: reset env %d: %w", i, err)
		}
		obs = append(obs, b.Obs...)
	}
	if sl[1]-sl[0] == 1 {
		return groups[sl[0]], obs, nil
	}
	return newJoined(groups[sl[0]:sl[1]]), obs, nil
}

// joined is one vector of several multi-agent slots (each a vector of its
// agents' rows), stepped one after another. Its slots are reset one by
// one (workerEnvs), each with its own seed.
type joined struct {
	slots []env.Vector
	rows  int // per slot
	batch env.Batch
}

func newJoined(slots []env.Vector) *joined {
	rows, od := slots[0].NumEnvs(), slots[0].ObservationSpace().Dim()
	n := rows * len(slots)
	return &joined{slots: slots, rows: rows, batch: env.Batch{ObsDim: od, Obs: make([]float32, n*od), Rewards: make([]float32, n),
		Terminated: make([]bool, n), Truncated: make([]bool, n), Infos: make([]env.Info, n), FinalObs: make([]float32, n*od)}}
}

func (j *joined) NumEnvs() int                { return j.rows * len(j.slots) }
func (j *joined) ObservationSpace() env.Space { return j.slots[0].ObservationSpace() }
func (j *joined) ActionSpace() env.Space      { return j.slots[0].ActionSpace() }

func (j *joined) Reset(int64) (*env.Batch, error) {
	return nil, errors.New("hts: the slots of an env worker are reset one by one")
}

func (j *joined) Step(actions []float32) (*env.Batch, error) {
	d, od, m := j.ActionSpace().Dim(), j.batch.ObsDim, j.rows
	if len(actions) != j.NumEnvs()*d {
		return nil, fmt.Errorf("hts: %d action values for %d rows × %d", len(actions), j.NumEnvs(), d)
	}
	out := &j.batch
	for g, v := range j.slots {
		b, err := v.Step(actions[g*m*d : (g+1)*m*d])
		if err != nil {
			return nil, err
		}
		lo := g * m
		copy(out.Obs[lo*od:(lo+m)*od], b.Obs)
		copy(out.FinalObs[lo*od:(lo+m)*od], b.FinalObs)
		copy(out.Rewards[lo:lo+m], b.Rewards)
		copy(out.Terminated[lo:lo+m], b.Terminated)
		copy(out.Truncated[lo:lo+m], b.Truncated)
		copy(out.Infos[lo:lo+m], b.Infos)
	}
	return out, nil
}

func (j *joined) Close() error {
	var errs []error
	for _, v := range j.slots {
		errs = append(errs, v.Close())
	}
	return errors.Join(errs...)
}
