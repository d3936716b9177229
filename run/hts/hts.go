package hts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
	"herd/weights"
)

// ErrConfig marks an unusable HTS setup; it wraps algo.ErrConfig.
var ErrConfig = fmt.Errorf("%w: hts", algo.ErrConfig)

// Shape is what HTS needs of an on-policy algorithm's config: the envs,
// the rollout length and the discount of the truncation bootstrap.
type Shape interface {
	RolloutShape() (numEnvs, numSteps int, gamma float32)
}

// modeler is a learner that can hand out its model (to save and evaluate).
type modeler interface{ Model() algo.Model }

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
// package doc for why.
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	shape, ok := cfg.(Shape)
	if !ok || spec.Pieces == nil {
		return nil, fmt.Errorf("%w: algorithm %s has no on-policy pieces (HTS runs PPO and A2C)", ErrConfig, spec.Name)
	}
	numEnvs, T, gamma := shape.RolloutShape()
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
	if env.IsParallel(h.Env) {
		pe, err := env.MakeParallel(h.Env)
		if err != nil {
			return nil, err
		}
		agentsPerSlot = len(pe.PossibleAgents())
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
	defer func() {
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
	if env.IsParallel(h.Env) {
		groups = make([]env.Vector, slots)
		for i := range groups {
			g, err := env.MakeVector(h.Env, agentsPerSlot, env.Sync, mkOpts...)
			if err != nil {
				return nil, err
			}
			groups[i] = g
		}
		spaces = algo.SpacesOf(groups[0])
	} else {
		envs = make([]env.Env, numEnvs)
		for i := range envs {
			e, err := env.Make(h.Env, mkOpts...)
			if err != nil {
				return nil, err
			}
			envs[i] = e
		}
		spaces = algo.SpacesOf(envs[0])
	}
	pieces, err := spec.Pieces(h, cfg, spaces)
	if err != nil {
		return nil, err
	}
	if pieces.NewSegmentLearner == nil {
		return nil, fmt.Errorf("%w: algorithm %s is not on-policy (HTS runs PPO and A2C)", ErrConfig, spec.Name)
	}
	learner, err := pieces.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	defer learner.Close()
	mod, ok := learner.(modeler)
	if !ok {
		return nil, fmt.Errorf("%w: %s's learner cannot hand out its model", ErrConfig, spec.Name)
	}
	rt.Track(mod.Model()) // divergence guard (algo.TrainRun)
	obsDim, actDim := spaces.Obs.Dim(), spaces.Act.Dim()
	samplers := make([]algo.Sampler, numEnvs)
	for i := range samplers {
		if samplers[i], err = pieces.NewSampler(1, rng.New(h.Seed, "env-worker", i)); err != nil {
			return nil, err
		}
	}

	store := weights.NewStore(learner.Weights())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf := newInference(numEnvs + numEnvs) // every env's step request plus a bootstrap request each
	var pwg sync.WaitGroup
	outDim := 0
	for range opt.PolicyWorkers {
		p, err := pieces.NewPolicy()
		if err != nil {
			cancel()
			pwg.Wait()
			return nil, err
		}
		outDim = p.OutDim()
		pwg.Add(1)
		go func() { defer pwg.Done(); inf.serve(ctx, p, store, obsDim) }()
	}
	stop := func() { cancel(); pwg.Wait() }

	workers := spread(slots, opt.EnvWorkers)
	ews := make([]*envWorker, len(workers))
	for k, w := range workers {
		lo, hi := w[0]*agentsPerSlot, w[1]*agentsPerSlot // rows
		ews[k] = &envWorker{lo: lo, hi: hi, n: numEnvs, T: T, obsDim: obsDim, actDim: actDim, outDim: outDim,
			gamma: gamma, samplers: samplers[lo:hi], inf: inf}
		if groups != nil {
			ews[k].groups, ews[k].agents, ews[k].slot0 = groups[w[0]:w[1]], agentsPerSlot, w[0]
		} else {
			ews[k].envs = envs[lo:hi]
		}
		if err := ews[k].reset(h.Seed); err != nil {
			stop()
			return nil, err
		}
	}

	// Two storages: env workers fill segs[k%2] while the learner reads
	// segs[(k-1)%2].
	segs := [2]*sample.Segment{sample.NewSegment(T, numEnvs, obsDim, actDim), sample.NewSegment(T, numEnvs, obsDim, actDim)}
	type learned struct {
		stats []algo.Stat
		next  *weights.Version
		err   error
	}
	learnDone := make(chan learned, 1)
	learning := false
	finish := func() (learned, bool) {
		if !learning {
			return learned{}, false
		}
		learning = false
		return <-learnDone, true
	}
	// fail stops every goroutine, the learner included, before the model
	// is handed out.
	fail := func(err error) (algo.Model, error) {
		stop()
		finish()
		return mod.Model(), err
	}
	var globalStep int64
	for k := range iters {
		seg := segs[k%2]
		seg.Version = store.Latest().N
		t0 := time.Now()
		err := collect(ctx, ews, seg, globalStep, opt.Sync)
		t1 := time.Now()
		// Barrier: every env worker has finished its α steps. Collect the
		// learner's update of the previous segment, publish it, and hand
		// it this segment.
		res, ok := finish()
		if tm := opt.Timing; tm != nil {
			tm.Collect += t1.Sub(t0)
			tm.LearnWait += time.Since(t1)
			tm.Segments++
			tm.StepsPerEnv = T
		}
		if ok && res.err == nil {
			for _, s := range res.stats {
				rt.Log.Scalar(s.Name, s.Value)
			}
			res.err = store.Publish(res.next)
		}
		if err == nil && ok {
			err = res.err
		}
		if err != nil {
			return fail(err)
		}
		for _, e := range seg.Episodes {
			rt.Log.Episode(globalStep+int64((e.At+1)*numEnvs), e.Return, e.Length)
		}
		globalStep += int64(T * numEnvs)
		learning = true
		learn := func(seg *sample.Segment) {
			stats, err := learner.Learn(ctx, seg)
			learnDone <- learned{stats: stats, next: learner.Weights(), err: err}
		}
		if opt.Sync {
			// No overlap and no lag: the next segment is collected with
			// the weights learned from this one.
			learn(seg)
			res, _ := finish()
			if res.err == nil {
				res.err = store.Publish(res.next)
			}
			if res.err != nil {
				return fail(res.err)
			}
			for _, s := range res.stats {
				rt.Log.Scalar(s.Name, s.Value)
			}
			rt.Log.Step(globalStep)
		} else {
			// The row (and the divergence guard's look at the parameters)
			// comes before the learner starts writing them again.
			rt.Log.Step(globalStep)
			go learn(seg)
		}
	}
	res, _ := finish()
	stop()
	if res.err != nil {
		return mod.Model(), res.err
	}
	for _, s := range res.stats {
		rt.Log.Scalar(s.Name, s.Value)
	}
	rt.Log.Step(globalStep)
	return mod.Model(), nil
}

// spread splits n envs into w contiguous blocks [lo, hi).
func spread(n, w int) [][2]int {
	out := make([][2]int, w)
	for k := range w {
		out[k] = [2]int{k * n / w, (k + 1) * n / w}
	}
	return out
}

// collect runs every env worker for one segment and merges their episodes
// in (step, env) order.
func collect(ctx context.Context, ews []*envWorker, seg *sample.Segment, step int64, lockstep bool) error {
	all := func(f func(w *envWorker) error) error {
		errs := make([]error, len(ews))
		var wg sync.WaitGroup
		for k, w := range ews {
			wg.Add(1)
			go func() { defer wg.Done(); errs[k] = f(w) }()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	var err error
	if lockstep {
		// The synchronous baseline: every step waits for the slowest env.
		for _, w := range ews {
			w.episodes = w.episodes[:0]
		}
		for t := 0; t < ews[0].T && err == nil; t++ {
			err = all(func(w *envWorker) error { return w.step(ctx, seg, t, step) })
		}
		if err == nil {
			err = all(func(w *envWorker) error { return w.end(ctx, seg) })
		}
	} else {
		err = all(func(w *envWorker) error { return w.collect(ctx, seg, step) })
	}
	if err != nil {
		return err
	}
	seg.Episodes = seg.Episodes[:0]
	for _, w := range ews {
		seg.Episodes = append(seg.Episodes, w.episodes...)
	}
	// Workers are in env order, so a stable sort by step gives (step, env).
	slices.SortStableFunc(seg.Episodes, func(a, b sample.Episode) int { return a.At - b.At })
	return nil
}

// envWorker steps envs [lo, hi) for α steps per segment, asking the policy
// workers for outputs and sampling with each env's own sampler.
type envWorker struct {
	lo, hi, n, T           int
	obsDim, actDim, outDim int
	gamma                  float32
	envs                   []env.Env
	groups                 []env.Vector // multi-agent: one env of agents rows per slot, in place of envs
	agents, slot0          int          // rows per group; the worker's first slot
	groupActs              []float32
	samplers               []algo.Sampler
	inf                    *inference
	obs                    []float32 // (hi−lo) × obsDim: what each env acts on next
	acts                   []algo.Acts
	req, boot              *request
	v                      [1]float32
	episodes               []sample.Episode
}

func (w *envWorker) reset(seed uint64) error {
	m := w.hi - w.lo
	w.obs = make([]float32, m*w.obsDim)
	w.acts = make([]algo.Acts, m)
	w.req, w.boot = newRequest(m, w.obsDim, w.outDim), newRequest(1, w.obsDim, w.outDim)
	for g, v := range w.groups {
		b, err := v.Reset(int64(rng.Derive(seed, "hts/env", w.slot0+g) >> 1))
		if err != nil {
			return fmt.Errorf("hts: reset env %d: %w", w.slot0+g, err)
		}
		copy(w.obs[g*w.agents*w.obsDim:], b.Obs)
	}
	for j, e := range w.envs {
		o, _, err := e.Reset(int64(rng.Derive(seed, "hts/env", w.lo+j) >> 1))
		if err != nil {
			return fmt.Errorf("hts: reset env %d: %w", w.lo+j, err)
		}
		copy(w.obs[j*w.obsDim:], o)
	}
	return nil
}

func (w *envWorker) collect(ctx context.Context, seg *sample.Segment, step int64) error {
	w.episodes = w.episodes[:0]
	for t := range w.T {
		if err := w.step(ctx, seg, t, step); err != nil {
			return err
		}
	}
	return w.end(ctx, seg)
}

// step takes step t of every env of the worker.
func (w *envWorker) step(ctx context.Context, seg *sample.Segment, t int, step int64) error {
	od, ad := w.obsDim, w.actDim
	row := t*w.n + w.lo
	copy(seg.Obs[row*od:], w.obs)
	out, err := w.inf.do(ctx, w.req, w.obs)
	if err != nil {
		return err
	}
	if w.groups != nil {
		return w.stepGroups(ctx, seg, t, step, out)
	}
	for j, e := range w.envs {
		k := row + j
		a := &w.acts[j]
		w.samplers[j].SampleTo(a, out[j*w.outDim:(j+1)*w.outDim], 1, step+int64(t*w.n))
		copy(seg.Actions[k*ad:(k+1)*ad], a.Actions)
		seg.LogProbs[k], seg.Values[k] = a.LogProbs[0], a.Values[0]
		o, r, term, trunc, info, err := e.Step(a.EnvActions)
		if err != nil {
			return fmt.Errorf("hts: env %d: %w", w.lo+j, err)
		}
		seg.Rewards[k], seg.Dones[k] = float32(r), 0
		if term || trunc {
			seg.Dones[k] = 1
			if trunc && !term {
				// Bootstrap from the true final observation with the
				// behaviour policy's value, as the local loop does.
				out, err := w.inf.do(ctx, w.boot, o)
				if err != nil {
					return err
				}
				seg.Rewards[k] += w.gamma * out[w.outDim-1]
			}
			if info.HasEpisode {
				w.episodes = append(w.episodes, sample.Episode{Return: info.Episode.Return, Length: info.Episode.Length, At: t})
			}
			if o, _, err = e.Reset(env.NoSeed); err != nil {
				return fmt.Errorf("hts: reset env %d: %w", w.lo+j, err)
			}
		}
		copy(w.obs[j*od:(j+1)*od], o)
	}
	return nil
}

// stepGroups is step for multi-agent slots: every row of a slot samples
// its action, then the slot's env steps once for all of them (a
// FlatVector resets an ended episode itself).
func (w *envWorker) stepGroups(ctx context.Context, seg *sample.Segment, t int, step int64, out []float32) error {
	od, ad := w.obsDim, w.actDim
	row := t*w.n + w.lo
	for g, v := range w.groups {
		w.groupActs = w.groupActs[:0]
		for a := range w.agents {
			j := g*w.agents + a
			k := row + j
			ac := &w.acts[j]
			w.samplers[j].SampleTo(ac, out[j*w.outDim:(j+1)*w.outDim], 1, step+int64(t*w.n))
			copy(seg.Actions[k*ad:(k+1)*ad], ac.Actions)
			seg.LogProbs[k], seg.Values[k] = ac.LogProbs[0], ac.Values[0]
			w.groupActs = append(w.groupActs, ac.EnvActions...)
		}
		b, err := v.Step(w.groupActs)
		if err != nil {
			return fmt.Errorf("hts: env %d: %w", w.slot0+g, err)
		}
		for a := range w.agents {
			j := g*w.agents + a
			k := row + j
			seg.Rewards[k], seg.Dones[k] = b.Rewards[a], 0
			if b.Done(a) {
				seg.Dones[k] = 1
				if b.Truncated[a] && !b.Terminated[a] {
					out, err := w.inf.do(ctx, w.boot, b.FinalObsRow(a))
					if err != nil {
						return err
					}
					seg.Rewards[k] += w.gamma * out[w.outDim-1]
				}
				if info := b.Infos[a]; info.HasEpisode {
					w.episodes = append(w.episodes, sample.Episode{Return: info.Episode.Return, Length: info.Episode.Length, At: t})
				}
			}
			copy(w.obs[j*od:(j+1)*od], b.ObsRow(a))
		}
	}
	return nil
}

// end writes the segment's bootstrap: the observations after its last step
// and their values.
func (w *envWorker) end(ctx context.Context, seg *sample.Segment) error {
	copy(seg.NextObs[w.lo*w.obsDim:w.hi*w.obsDim], w.obs)
	out, err := w.inf.do(ctx, w.req, w.obs)
	if err != nil {
		return err
	}
	for j := range w.hi - w.lo {
		seg.LastValues[w.lo+j] = out[(j+1)*w.outDim-1] // on-policy rows end with V(s)
	}
	return nil
}

// request is one env worker's inference request: rows of observations in,
// rows of outputs back. Each env worker owns its requests and reuses them.
type request struct {
	obs  []float32
	out  []float32
	err  error
	done chan struct{}
}

func newRequest(rows, obsDim, outDim int) *request {
	return &request{obs: make([]float32, rows*obsDim), out: make([]float32, rows*outDim), done: make(chan struct{}, 1)}
}

// inference is the in-process inference stream: env workers send requests,
// policy workers take whatever is pending and answer it as one batch.
type inference struct {
	reqs chan *request
}

func newInference(capacity int) *inference { return &inference{reqs: make(chan *request, capacity)} }

// do sends obs (some rows) and waits for the outputs.
func (s *inference) do(ctx context.Context, r *request, obs []float32) ([]float32, error) {
	copy(r.obs, obs)
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-r.done:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// serve answers requests until ctx ends, batching every request pending
// when it wakes. The weights change only at barriers, when no request is in
// flight, so which worker answers a request never changes its outputs.
func (s *inference) serve(ctx context.Context, p algo.PolicyNet, store *weights.Store, obsDim int) {
	var batch []*request
	var obs, out []float32
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-ctx.Done():
			return
		}
	drain:
		for {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		var err error
		if v := store.Latest(); v.N != p.Version() {
			if err = p.SetWeights(v); err != nil {
				err = fmt.Errorf("hts: policy worker: %w", err)
			}
		}
		obs = obs[:0]
		rows := 0
		for _, r := range batch {
			obs = append(obs, r.obs...)
			rows += len(r.obs) / obsDim
		}
		if err == nil {
			out = grow(out, rows*p.OutDim())
			p.ForwardTo(out, obs, rows)
		}
		off := 0
		for _, r := range batch {
			if r.err = err; err == nil {
				off += copy(r.out, out[off:])
			}
			r.done <- struct{}{}
		}
	}
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
