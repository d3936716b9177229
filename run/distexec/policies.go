package distexec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"herd/algo"
	"herd/env"
	"herd/metrics"
	"herd/run/hts"
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
	iters   int     // segments each policy's learner learns from
	sets    []*Setup
	rd      *rounds // the learners' barrier
}

// preparePolicies checks a multiagent run against the on-policy dist
// topology and builds every policy's Setup.
func preparePolicies(h algo.Header, spec algo.Spec, cfg algo.Config, others map[string]algo.AlgoConfig) (*policySetups, error) {
	rc := h.Runtime
	switch {
	case rc.Inference == algo.InferenceInline:
		return nil, fmt.Errorf("%w: several policies under dist need policy workers (runtime.inference inline is not available)", ErrConfig)
	case rc.Learners > 1:
		return nil, fmt.Errorf("%w: several policies under dist have one learner each (runtime.learners %d is not available)", ErrConfig, rc.Learners)
	case rc.EnvGroups > 1:
		return nil, fmt.Errorf("%w: several policies under dist step one vector per env worker (runtime.env_groups %d is not available)", ErrConfig, rc.EnvGroups)
	case rc.StepTime != nil:
		return nil, fmt.Errorf("%w: step_time is not available for a multi-agent env (%s)", ErrConfig, h.Env)
	}
	shape, ok := cfg.(hts.Shape)
	if !ok || spec.Pieces == nil {
		return nil, fmt.Errorf("%w: several policies under dist: algorithm %s has no on-policy pieces (PPO, A2C)", ErrConfig, spec.Name)
	}
	numEnvs, T, _ := shape.RolloutShape()
	pe, err := env.MakeParallel(h.Env)
	if err != nil {
		return nil, fmt.Errorf("distexec: %w", err)
	}
	agents := slices.Clone(pe.PossibleAgents())
	pe.Close()
	of, err := h.MultiAgent.Map(agents)
	if err != nil {
		return nil, err
	}
	a := len(agents)
	if numEnvs < a || numEnvs%a != 0 || T < 1 {
		return nil, fmt.Errorf("%w: num_envs %d counts agent rows: a multiple of %s's %d agents; num_steps %d", ErrConfig, numEnvs, h.Env, a, T)
	}
	iters := int(h.Steps / int64(numEnvs*T))
	if iters < 1 {
		return nil, fmt.Errorf("%w: steps %d is less than one segment of every row (%d rows × %d steps)", ErrConfig, h.Steps, numEnvs, T)
	}
	v, err := env.MakeVector(h.Env, a, env.Sync)
	if err != nil {
		return nil, err
	}
	spaces := algo.SpacesOf(v)
	v.Close()
	ps := &policySetups{ids: h.MultiAgent.Policies, agents: agents, of: of, numEnvs: numEnvs, iters: iters,
		rows: make([][]int, len(h.MultiAgent.Policies))}
	for i := range numEnvs / a {
		for j, k := range of {
			ps.rows[k] = append(ps.rows[k], i*a+j)
		}
	}
	for k, id := range ps.ids {
		n := len(ps.rows[k])
		hk, sk, ck, err := algo.PolicyRun(h, spec, cfg, others, k, n/(numEnvs/a), a)
		if err != nil {
			return nil, err
		}
		hk.Steps = int64(iters * T * n) // its rows' share of whole segments
		sh, ok := ck.(hts.Shape)
		if !ok || sk.Pieces == nil {
			return nil, fmt.Errorf("%w: policy %s: algorithm %s has no on-policy pieces (PPO, A2C)", ErrConfig, id, sk.Name)
		}
		_, tk, gamma := sh.RolloutShape()
		if tk != T {
			return nil, fmt.Errorf("%w: policy %s: %s.num_steps %d differs from %s.num_steps %d", ErrConfig, id, sk.Name, tk, spec.Name, T)
		}
		if err := ck.Validate(hk); err != nil {
			return nil, fmt.Errorf("distexec: policy %s: %w", id, err)
		}
		pieces, err := sk.Pieces(hk, ck, spaces)
		if err != nil {
			return nil, err
		}
		if pieces.NewSegmentLearner == nil {
			return nil, fmt.Errorf("%w: policy %s: algorithm %s is not on-policy", ErrConfig, id, sk.Name)
		}
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

// PolicyRun is the run ID of policy id's streams in run: each policy's
// samples, inference requests and weights travel on streams of its own,
// so a sample reaches its policy's learner by its stream alone.
func PolicyRun(run, id string) string { return run + "-" + id }

// runEnvWorker runs env worker slot: one vector of every agent's rows, cut
// into one part per policy (env.SplitVector, lockstep), each part driven
// by worker.RunEnvVector on its policy's streams, on a goroutine of its
// own.
func (ps *policySetups) runEnvWorker(ctx context.Context, slot int, tr transport.Transport, run string) error {
	h := ps.sets[0].Header
	v, err := env.MakeVector(h.Env, ps.numEnvs, env.Sync, env.WithEpisodeStatistics())
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

// runPolicyWorker runs policy worker slot, which serves every policy: one
// server per policy, each on that policy's streams and weights.
func (ps *policySetups) runPolicyWorker(ctx context.Context, slot int, tr transport.Transport, run string) error {
	return ps.each(func(k int, s *Setup) error { return s.RunPolicyWorker(ctx, slot, tr, PolicyRun(run, ps.ids[k])) })
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
// workers each serving every policy. The learners move in rounds: each
// learns one segment, then waits until every other has learned one; the
// last to arrive logs the round in policy order (its episodes, scalars
// and dist/… counters under policy/<id>/), so metrics.csv's rows do not
// depend on which learner finished first.
func trainPolicies(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	ps, err := preparePolicies(h, spec, cfg, rt.Others)
	if err != nil {
		return nil, err
	}
	if opt.EnvWorkers == 0 {
		opt.EnvWorkers = 1
	}
	if opt.PolicyWorkers == 0 {
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
	run := opt.Run
	if run == "" {
		run = "herd"
	}
	stall := opt.Stall
	if stall == 0 {
		stall = DefaultStall
	}

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
	learners := make([]func() (algo.SegmentLearner, error), n)
	for k, s := range ps.sets {
		end, err := s.openLearnerEnd(ctx, newTransport, PolicyRun(run, ps.ids[k]))
		if err != nil {
			return nil, err
		}
		defer end.close()
		smp, par := end.smp, end.par
		logs[k] = &prefixLog{Logger: rt.Log, prefix: "policy/" + ps.ids[k] + "/"}
		mons[k] = newMonitor(logs[k], smp, end.mem, opt.Notice, stall)
		mons[k].who = logs[k].prefix
		learners[k] = func() (algo.SegmentLearner, error) {
			return worker.RunLearner(wctx, worker.LearnerConfig{Iterations: ps.iters, MaxLag: maxLagOf(opt), Stall: stall,
				Alive: mons[k].alive, Counters: &mons[k].cnt,
				OnIteration: func(_ int, seg *sample.Segment, stats []algo.Stat) {
					ps.arrive(wctx, k, round{seg: seg, stats: stats})
				}}, s.Pieces, smp, par)
		}
	}
	var step int64
	ps.rd = &rounds{n: n, recs: make([]round, n), release: make(chan struct{}), do: func(recs []round) {
		for k, r := range recs {
			for _, e := range r.seg.Episodes {
				rt.Log.Episode(step+int64((e.At+1)*ps.numEnvs), e.Return, e.Length)
			}
			logs[k].episodes(r.seg.Episodes)
			for _, st := range r.stats {
				logs[k].Scalar(st.Name, st.Value)
			}
			mons[k].step = step
			mons[k].scalars(wctx, false)
		}
		step += int64(ps.sets[0].T * ps.numEnvs)
		rt.Log.Step(step)
	}}
	models := make([]algo.Model, n)
	errs := make([]error, n)
	var lwg sync.WaitGroup
	for k := range n {
		lwg.Go(func() {
			l, err := learners[k]()
			if err != nil {
				errs[k] = fmt.Errorf("policy %s: %w", ps.ids[k], err)
				ws.stop() // the other learners would wait for this one's rounds
			}
			if m, ok := l.(interface{ Model() algo.Model }); ok {
				models[k] = m.Model()
			}
		})
	}
	lwg.Wait()
	werr := ws.wait()
	for _, m := range mons {
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

// round is what one learner hands its round: the segment it learned from
// and its scalars.
type round struct {
	seg   *sample.Segment
	stats []algo.Stat
}

// rounds is the learners' barrier: the last of n to arrive calls do with
// every learner's round, while the others wait (so do reads their segments
// and counters while no learner writes them).
type rounds struct {
	mu      sync.Mutex
	n, in   int
	recs    []round
	release chan struct{}
	do      func([]round)
}

func (ps *policySetups) arrive(ctx context.Context, k int, r round) {
	rd := ps.rd
	rd.mu.Lock()
	rd.recs[k] = r
	rd.in++
	ch := rd.release
	if rd.in == rd.n {
		rd.do(rd.recs)
		rd.in, rd.release = 0, make(chan struct{})
		rd.mu.Unlock()
		close(ch)
		return
	}
	rd.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// prefixLog is a policy's view of the run's logger: scalars under
// policy/<id>/, and its agents' episode columns (algo.PolicyScalars).
type prefixLog struct {
	algo.Logger
	prefix     string
	rets, lens []float64
	count      int64
}

func (l *prefixLog) Scalar(name string, v float64) { l.Logger.Scalar(l.prefix+name, v) }

func (l *prefixLog) episodes(eps []sample.Episode) {
	if len(eps) == 0 {
		return
	}
	for _, e := range eps {
		if len(l.rets) == metrics.Window {
			l.rets, l.lens = l.rets[1:], l.lens[1:]
		}
		l.rets, l.lens = append(l.rets, e.Return), append(l.lens, float64(e.Length))
		l.count++
	}
	l.Scalar("return_mean", mean(l.rets))
	l.Scalar("length_mean", mean(l.lens))
	l.Scalar("episodes", float64(l.count))
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, v := range xs {
		s += v
	}
	return s / float64(len(xs))
}
