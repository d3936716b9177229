package distexec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"herd/algo"
	"herd/env"
	"herd/sample"
	"herd/transport"
	"herd/worker"
)

// policySetups is the Setup of every policy of a multiagent section: policy
// k's header (algo.PolicyRun: seed + k, its algorithm and section), its
// pieces on the agents' rows, and an env worker's share of its rows.
type policySetups struct {
	ids     []string
	agents  []string
	of      []int
	rows    [][]int // rows[k]: the rows of an env worker's vector that policy k acts for
	numEnvs int     // rows of an env worker's vector (every agent's)
	steps   int     // vector steps per round: the on-policy policies' num_steps, or (none) an off-policy chunk
	iters   int     // rounds each policy's learner learns
	sets    []*Setup
	rd      *rounds // the learners' rounds
}

// onPolicy reports whether some policy is on-policy (needs policy
// workers).
func (ps *policySetups) onPolicy() bool {
	for _, s := range ps.sets {
		if s.Off == nil {
			return true
		}
	}
	return false
}

// preparePolicies checks a multiagent run against the dist topology and
// builds every policy's Setup: an on-policy policy (PPO, A2C) gets the
// on-policy topology's pieces (policy workers, segments of num_steps), an
// off-policy one (DQN, …) the off-policy topology's (inline copies in the
// env workers, chunks of transitions, a learner with the replay).
func preparePolicies(h algo.Header, spec algo.Spec, cfg algo.Config, others map[string]algo.AlgoConfig) (*policySetups, error) {
	rc := h.Runtime
	switch {
	case rc.Learners > 1:
		return nil, fmt.Errorf("%w: several policies under dist have one learner each (runtime.learners %d is not available)", ErrConfig, rc.Learners)
	case rc.EnvGroups > 1:
		return nil, fmt.Errorf("%w: several policies under dist step one vector per env worker (runtime.env_groups %d is not available)", ErrConfig, rc.EnvGroups)
	case rc.StepTime != nil:
		return nil, fmt.Errorf("%w: step_time is not available for a multi-agent env (%s)", ErrConfig, h.Env)
	}
	numEnvs, ok := algo.NumEnvs(cfg)
	if !ok || spec.Pieces == nil {
		return nil, fmt.Errorf("%w: several policies under dist: algorithm %s has neither a segment nor a transition learner", ErrConfig, spec.Name)
	}
	agents, of, acts, err := h.MultiAgent.PolicyAgents(h.Envs, h.Env)
	if err != nil {
		return nil, fmt.Errorf("distexec: %w", err)
	}
	a := len(agents)
	if numEnvs < a || numEnvs%a != 0 {
		return nil, fmt.Errorf("%w: num_envs %d counts agent rows: a multiple of %s's %d agents", ErrConfig, numEnvs, h.Env, a)
	}
	v, err := h.Envs.MakeVector(h.Env, a, env.Sync, env.WithAgentActionSpaces())
	if err != nil {
		return nil, err
	}
	spaces := algo.SpacesOf(v) // each policy's Act is its own agents' (acts)
	v.Close()
	ps := &policySetups{ids: h.MultiAgent.Policies, agents: agents, of: of, numEnvs: numEnvs,
		rows: make([][]int, len(h.MultiAgent.Policies))}
	for i := range numEnvs / a {
		for j, k := range of {
			ps.rows[k] = append(ps.rows[k], i*a+j)
		}
	}

	// Each policy's run, and the round: every on-policy policy's
	// num_steps (one segment per round), else one chunk of the off-policy
	// policy with the fewest rows.
	type policyRun struct {
		h   algo.Header
		s   algo.Spec
		c   algo.Config
		off bool
	}
	runs := make([]policyRun, len(ps.ids))
	T, onID, fewest := 0, "", 0
	for k, id := range ps.ids {
		n := len(ps.rows[k])
		hk, sk, ck, err := algo.PolicyRun(h, spec, cfg, others, k, n/(numEnvs/a), a)
		if err != nil {
			return nil, err
		}
		runs[k] = policyRun{h: hk, s: sk, c: ck}
		_, off := ck.(algo.TransitionShape)
		sh, on := ck.(algo.Rollout)
		switch {
		case sk.Pieces == nil || (!off && !on):
			return nil, fmt.Errorf("%w: policy %s: algorithm %s has neither a segment nor a transition learner", ErrConfig, id, sk.Name)
		case off:
			runs[k].off = true
			if fewest == 0 || n < fewest {
				fewest = n
			}
		default:
			_, tk, _ := sh.RolloutShape()
			if T == 0 {
				T, onID = tk, id
			} else if tk != T {
				return nil, fmt.Errorf("%w: policy %s: %s.num_steps %d differs from policy %s's num_steps %d", ErrConfig, id, sk.Name, tk, onID, T)
			}
		}
	}
	switch {
	case T > 0 && rc.Inference == algo.InferenceInline:
		return nil, fmt.Errorf("%w: on-policy policies under dist need policy workers (runtime.inference inline is not available with several policies)", ErrConfig)
	case T == 0 && (rc.PolicyWorkers > 0 || rc.Inference == algo.InferencePolicyWorkers):
		return nil, fmt.Errorf("%w: policy_workers %d, inference %q: every policy is off-policy, and their env workers act with inline policy copies",
			ErrConfig, rc.PolicyWorkers, rc.Inference)
	case T == 0:
		T = max(1, ChunkEnvSteps/fewest)
	}
	ps.steps = T
	if ps.iters = int(h.Steps / int64(numEnvs*T)); ps.iters < 1 {
		return nil, fmt.Errorf("%w: steps %d is less than one round of every row (%d rows × %d steps)", ErrConfig, h.Steps, numEnvs, T)
	}
	for k, id := range ps.ids {
		n := len(ps.rows[k])
		hk, sk, ck := runs[k].h, runs[k].s, runs[k].c
		hk.Steps = int64(ps.iters * T * n) // its rows' share of whole rounds
		if err := ck.Validate(hk); err != nil {
			return nil, fmt.Errorf("distexec: policy %s: %w", id, err)
		}
		sp := spaces
		sp.Act = acts[k]
		pieces, err := sk.Pieces(hk, ck, sp)
		if err != nil {
			return nil, err
		}
		if runs[k].off {
			s, err := offPolicySetup(hk, sk, pieces, spaces.Obs.Dim(), n, T)
			if err != nil {
				return nil, fmt.Errorf("policy %s: %w", id, err)
			}
			ps.sets = append(ps.sets, s)
			continue
		}
		if pieces.NewSegmentLearner == nil {
			return nil, fmt.Errorf("%w: policy %s: algorithm %s is not on-policy", ErrConfig, id, sk.Name)
		}
		_, _, gamma := ck.(algo.Rollout).RolloutShape()
		p0, err := pieces.NewPolicy()
		if err != nil {
			return nil, err
		}
		like, err := paramsOf(pieces)
		if err != nil {
			return nil, err
		}
		ps.sets = append(ps.sets, &Setup{Header: hk, NumEnvs: n, T: T, Gamma: gamma, Pieces: pieces, Learners: 1,
			Stream: transport.Options{ObsDim: spaces.Obs.Dim(), OutDim: p0.OutDim(), Like: like, MaxBatchRows: max(4096, n),
				Capacity: OnCapacity}})
	}
	return ps, nil
}

// offPolicySetup is the Setup of an off-policy policy acting on n rows
// of each env worker's vector, in rounds of T vector steps: the
// off-policy topology of one learner, whose env workers push a chunk
// every C steps, C the largest divisor of T of at most ChunkEnvSteps / n
// steps, so that a round is whole chunks and the policy's budget (whole
// rounds) whole samples: its learner learns every transition of its
// budget, and no part of one.
func offPolicySetup(h algo.Header, spec algo.Spec, pieces *algo.Pieces, obsDim, n, T int) (*Setup, error) {
	c := min(max(1, ChunkEnvSteps/n), T)
	for T%c != 0 {
		c--
	}
	off, err := newOffSetup(h.Runtime, n, c)
	if err != nil {
		return nil, err
	}
	like, outDim, _, err := offParams(spec, pieces)
	if err != nil {
		return nil, err
	}
	return &Setup{Header: h, NumEnvs: n, T: T, Pieces: pieces, Off: off, Learners: 1,
		Stream: transport.Options{ObsDim: obsDim, OutDim: outDim, Like: like, MaxBatchRows: max(4096, n),
			Capacity: OffCapacity}}, nil
}

// PolicyRun is the run ID of policy id's streams in run: each policy's
// samples, inference requests and weights travel on streams of its own,
// so a sample reaches its policy's learner by its stream alone.
func PolicyRun(run, id string) string { return run + "-" + id }

// runEnvWorker runs env worker slot: one vector of every agent's rows, cut
// into one part per policy (env.SplitVector, lockstep), each part driven
// on its policy's streams, on a goroutine of its own: an on-policy
// policy's by worker.RunEnvVector (its policy workers act), an off-policy
// one's by worker.RunOffEnv (an inline copy acts; chunks of transitions).
func (ps *policySetups) runEnvWorker(ctx context.Context, slot int, tr transport.Transport, run string) error {
	h := ps.sets[0].Header
	// Each part acts with its policy's action space (env.SplitVector).
	v, err := h.Envs.MakeVector(h.Env, ps.numEnvs, env.Sync, env.WithEpisodeStatistics(), env.WithAgentActionSpaces())
	if err != nil {
		return err
	}
	parts, err := env.SplitVector(v, ps.rows, nil)
	if err != nil {
		v.Close()
		return err
	}
	return ps.each(func(k int, s *Setup) error {
		defer parts[k].Close() // the other parts then stop instead of waiting for it
		r := PolicyRun(run, ps.ids[k])
		if s.Off != nil {
			return s.runOffEnv(ctx, slot, tr, r, parts[k])
		}
		inf, smp, _, closeAll, err := s.roleStreams(ctx, tr, r, withInference)
		if err != nil {
			return err
		}
		defer closeAll()
		mem, prog, save, err := resume(ctx, tr, r, EnvWorkerName(slot))
		if err != nil {
			return err
		}
		defer mem.Close()
		return worker.RunEnvVector(ctx, worker.EnvConfig{Slot: slot, Seed: s.Header.Seed, Vector: parts[k], Steps: s.T, Gamma: s.Gamma,
			Resume: prog, OnPushed: save}, s.Pieces, inf, smp)
	})
}

// runPolicyWorker runs policy worker slot, which serves every on-policy
// policy: one server per policy, each on that policy's streams and
// weights (an off-policy policy's env workers act with inline copies).
func (ps *policySetups) runPolicyWorker(ctx context.Context, slot int, tr transport.Transport, run string) error {
	return ps.each(func(k int, s *Setup) error {
		if s.Off != nil {
			return nil
		}
		return s.RunPolicyWorker(ctx, slot, tr, PolicyRun(run, ps.ids[k]))
	})
}

// each runs f for every policy on goroutines of their own and returns
// their errors; a part that ended because another did (env.ErrPartEnded)
// is reported only when nothing else went wrong.
func (ps *policySetups) each(f func(k int, s *Setup) error) error {
	errs := make([]error, len(ps.sets))
	var wg sync.WaitGroup
	for k, s := range ps.sets {
		wg.Go(func() {
			if err := f(k, s); err != nil {
				errs[k] = fmt.Errorf("policy %s: %w", ps.ids[k], err)
			}
		})
	}
	wg.Wait()
	var own []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, env.ErrPartEnded) {
			own = append(own, err)
		}
	}
	if len(own) > 0 {
		return errors.Join(own...)
	}
	return errors.Join(errs...)
}

// trainPolicies is Train for a run with a multiagent section: one learner
// per policy (on its own streams, with its own weights versions and lag
// counts), E env workers each stepping every agent's rows, P policy
// workers each serving every on-policy policy (an off-policy policy's
// env workers act with inline copies and push chunks of transitions to
// its learner, which keeps the replay). The learners move in rounds of
// `steps` vector steps: an on-policy learner learns one segment, then
// waits until every other has handed in its round; an off-policy one
// hands in its round's samples' episodes, scalars and counters and goes
// on (see offLearner). The last to complete a round logs it in policy
// order (its episodes, scalars and dist/… counters under policy/<id>/),
// so metrics.csv's rows do not depend on which learner finished first.
func trainPolicies(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	ps, err := preparePolicies(h, spec, cfg, rt.Others)
	if err != nil {
		return nil, err
	}
	if opt.EnvWorkers == 0 {
		opt.EnvWorkers = 1
	}
	switch {
	case !ps.onPolicy():
		opt.PolicyWorkers = 0 // the env workers act with inline copies
	case opt.PolicyWorkers == 0:
		opt.PolicyWorkers = 1
	}
	if opt.LearnerOnly { // herd launch: the workers are processes of their own
		opt.EnvWorkers, opt.PolicyWorkers = 0, 0
	}
	if opt.EnvWorkers < 0 || opt.PolicyWorkers < 0 {
		return nil, fmt.Errorf("%w: env_workers %d and policy_workers %d must be ≥ 1", ErrConfig, opt.EnvWorkers, opt.PolicyWorkers)
	}
	newTransport, closeConns := opt.Dial, func() {}
	if newTransport == nil {
		if newTransport, closeConns, err = transportMaker(opt); err != nil {
			return nil, err
		}
	}
	defer closeConns()
	run := opt.runID(rt.Header)
	release, err := claimRun(ctx, opt, newTransport, run)
	if err != nil {
		return nil, err
	}
	defer release()
	stall := opt.stall()

	ws := newWorkers(ctx, newTransport)
	defer ws.wait()
	wctx, start := ws.ctx, ws.start
	for p := range opt.PolicyWorkers {
		if err := start(func(tr transport.Transport) error { return ps.runPolicyWorker(wctx, p, tr, run) }); err != nil {
			return nil, err
		}
	}
	for w := range opt.EnvWorkers {
		if err := start(func(tr transport.Transport) error { return ps.runEnvWorker(wctx, w, tr, run) }); err != nil {
			return nil, err
		}
	}

	// The learners, one per policy, and their monitors (dist/… under
	// policy/<id>/).
	n := len(ps.sets)
	mons := make([]*monitor, n)
	logs := make([]*prefixLog, n)
	learners := make([]func() (any, error), n)
	smps := make([]transport.SampleStream, n)
	offCnt := make([]*worker.Counters, n) // an off-policy learner's own counters (see offLearner)
	for k, s := range ps.sets {
		end, err := s.openLearnerEnd(ctx, newTransport, PolicyRun(run, ps.ids[k]))
		if err != nil {
			return nil, err
		}
		defer end.close()
		smp, par := end.smp, end.par
		smps[k] = smp
		logs[k] = &prefixLog{Logger: rt.Log, prefix: "policy/" + ps.ids[k] + "/"}
		mons[k] = newMonitor(logs[k], smp, end.mem, opt.Notice, stall)
		mons[k].who, mons[k].maxLag = logs[k].prefix, maxLagOf(opt, s.Header)
		if s.Off != nil {
			offCnt[k] = &worker.Counters{}
			learners[k] = func() (any, error) { return ps.offLearner(wctx, k, s, smp, par, mons[k].alive, stall, offCnt[k]) }
			continue
		}
		learners[k] = func() (any, error) {
			return worker.RunLearner(wctx, worker.LearnerConfig{Iterations: ps.iters, MaxLag: mons[k].maxLag, Stall: stall,
				Alive: mons[k].alive, Counters: &mons[k].cnt,
				OnIteration: func(_ int, seg *sample.Segment, stats []algo.Stat) {
					ps.arrive(wctx, k, round{episodes: seg.Episodes, stats: stats}, true)
				}}, s.Pieces, smp, par)
		}
	}
	var step int64
	ps.rd = &rounds{queued: make([][]round, n), release: make(chan struct{}), do: func(recs []round) {
		for k, r := range recs {
			for _, e := range r.episodes {
				rt.Log.Episode(step+int64((e.At+1)*ps.numEnvs), e.Return, e.Length)
			}
			logs[k].episodes(r.episodes)
			for _, st := range r.stats {
				logs[k].Scalar(st.Name, st.Value)
			}
			if r.cnt != nil {
				mons[k].cnt = *r.cnt
			}
			mons[k].step = step
			mons[k].scalars(wctx, false)
		}
		step += int64(ps.steps * ps.numEnvs)
		rt.Log.Step(step)
	}}
	models := make([]algo.Model, n)
	errs := make([]error, n)
	dctx, stopDrains := context.WithCancel(wctx)
	drained := make([]uint64, n)
	var lwg, dwg sync.WaitGroup
	for k := range n {
		lwg.Go(func() {
			l, err := learners[k]()
			if err != nil {
				errs[k] = fmt.Errorf("policy %s: %w", ps.ids[k], err)
				ws.stop() // the other learners would wait for this one's rounds
			}
			if m, ok := l.(algo.Modeler); ok {
				models[k] = m.Model()
			}
			if err == nil {
				dwg.Go(func() { drained[k] = drain(dctx, smps[k]) })
			}
		})
	}
	lwg.Wait()
	stopDrains()
	dwg.Wait()
	werr := ws.wait()
	for k, m := range mons {
		if offCnt[k] != nil {
			m.cnt = *offCnt[k] // its learner has returned
		}
		m.drained = drained[k]
		m.scalars(ctx, true)
	}
	model := &algo.Policies{IDs: ps.ids, Models: models, Agents: ps.agents, Of: ps.of}
	if slices.Contains(models, nil) {
		return nil, errors.Join(append(errs, fmt.Errorf("%w: a policy's learner handed out no model", ErrConfig))...)
	}
	if werr != nil {
		return model, werr
	}
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			return model, ctx.Err()
		}
		return model, err
	}
	return model, nil
}

// offLearner runs off-policy policy k's learner (worker.RunOffLearner,
// the single-policy off-policy learner) on its streams, and hands its
// rounds in: every steps/Chunk samples (one round of its env workers'
// rows), their episodes (At: the vector step in the round), its last
// scalars and a copy of its counters. It does not wait for the other
// learners' rounds: its env workers' next chunks may be all that the
// on-policy policies' env workers wait for (the parts step in lockstep),
// so waiting could stall the run; the round is logged when the others'
// have come in, from the copies.
func (ps *policySetups) offLearner(ctx context.Context, k int, s *Setup, smp transport.SampleStream, par transport.ParamService,
	alive func(context.Context) string, stall time.Duration, cnt *worker.Counters) (algo.TransitionLearner, error) {
	per := ps.steps / s.Off.Chunk // samples per round
	var (
		r round
		i int
	)
	return worker.RunOffLearner(ctx, worker.OffLearnerConfig{Steps: s.Header.Steps, StepsPerSample: s.Off.ChunkSteps,
		PublishEvery: s.Off.PublishEvery, Stall: stall, Alive: alive, Counters: cnt,
		OnSample: func(_ int64, tr *sample.Transitions, stats []algo.Stat) {
			for _, e := range tr.Episodes {
				e.At = (i+1)*s.Off.Chunk - 1
				r.episodes = append(r.episodes, e)
			}
			if len(stats) > 0 { // the last updates' (a sample may bring none)
				r.stats = slices.Clone(stats)
			}
			if i++; i == per {
				c := *cnt
				r.cnt = &c
				ps.arrive(ctx, k, r, false)
				r, i = round{}, 0
			}
		}}, s.Pieces, smp, par)
}

// drain takes and discards the samples of a policy whose learner has
// learned its budget, until ctx ends (every learner has). Its env workers'
// parts go on stepping in lockstep with the others' and pushing: an
// off-policy learner's budget may end mid-segment of an env worker whose
// segment an on-policy learner still waits for (its env workers' shares
// of the chunks and segments need not match), and the part's next push,
// with no learner to take it, would hold the whole vector. What is
// drained lies beyond the budget, as the samples an env worker pushes
// after a single-policy run's learner has ended. It returns how many it
// discarded (dist/discarded).
func drain(ctx context.Context, smp transport.SampleStream) (n uint64) {
	for {
		if _, err := smp.Pull(ctx); err != nil {
			return n
		}
		n++
	}
}

// round is what one learner hands in for a round: the episodes its rows
// ended (At: the vector step in the round), its scalars, and, from an
// off-policy learner, which goes on learning meanwhile, a copy of its
// counters.
type round struct {
	episodes []sample.Episode
	stats    []algo.Stat
	cnt      *worker.Counters
}

// rounds gathers the learners' rounds: when every learner has handed in
// round r, the last to do so calls do with them, in policy order. An
// on-policy learner waits until its round is logged (so do reads its
// segment and counters while it writes neither); an off-policy one hands
// in copies and goes on, its later rounds queued.
type rounds struct {
	mu      sync.Mutex
	queued  [][]round // queued[k]: learner k's rounds not yet logged, oldest first
	release chan struct{}
	do      func([]round)
}

func (ps *policySetups) arrive(ctx context.Context, k int, r round, wait bool) {
	rd := ps.rd
	rd.mu.Lock()
	rd.queued[k] = append(rd.queued[k], r)
	for !slices.ContainsFunc(rd.queued, func(q []round) bool { return len(q) == 0 }) {
		recs := make([]round, len(rd.queued))
		for j, q := range rd.queued {
			recs[j], rd.queued[j] = q[0], q[1:]
		}
		rd.do(recs)
		close(rd.release)
		rd.release = make(chan struct{})
	}
	logged := len(rd.queued[k]) == 0
	ch := rd.release
	rd.mu.Unlock()
	if !wait || logged {
		return
	}
	// A waiting learner has one round queued, so the next do logs it.
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// prefixLog is a policy's view of the run's logger: scalars under
// policy/<id>/, and its agents' episode columns (algo.PolicyScalars).
type prefixLog struct {
	algo.Logger
	prefix string
	stats  algo.PolicyEpisodes
}

func (l *prefixLog) Scalar(name string, v float64) { l.Logger.Scalar(l.prefix+name, v) }

func (l *prefixLog) episodes(eps []sample.Episode) {
	if len(eps) == 0 {
		return
	}
	for _, e := range eps {
		l.stats.Add(e.Return, e.Length)
	}
	l.stats.Log(l.Logger, l.prefix)
}
