// Package multipolicy trains several policies in one multi-agent env: the
// executor of a run config's multiagent section (algo.MultiAgentConfig).
//
// # The loop
//
// The env's rows (env.FlatVector: row i·A + j is agent j of env i) are cut
// by the policy mapping into one part per policy (env.SplitVector), and
// each policy's own local Train (Spec.Train, unchanged) runs on its own
// goroutine on its part, handed over through algo.Runtime.Envs:
//
//	for each joint step:
//	    every policy k acts on its agents' rows      (its Train, its goroutine)
//	    the last to arrive steps the whole vector once with all actions
//	    every policy k gets its rows back, learns when its algorithm says
//
// So policy k sees only the observations, rewards and ends of its own
// agents and learns only from them, with its own parameters, optimizer,
// replay and random streams (from run seed + k). A policy's algorithm is
// the run's, or the one multiagent.algos names for it (PPO for some
// agents and DQN for others: RLlib Flow's twin trainer), with that
// algorithm's section; num_envs counts all agents' rows (policy k gets
// envs × its agents of them) and steps all rows' steps (policy k's share
// is its rows'). The budget is rounded down to whole rollouts of every
// on-policy policy.
//
// # Metrics and determinism
//
// Each policy's metrics (episodes, losses) are held back and handed to the
// run's logger, as policy/<id>/<name> (algo.PolicyScalars), only at the
// next joint step, when every policy is waiting inside its env step, in
// policy order; the run's own return columns get every agent's episodes,
// as with one shared policy. Rows therefore depend only on the seed, never
// on which goroutine ran first: a seed gives the same metrics.csv and the
// same weights every time (TestDeterministic). The divergence guard checks
// every policy's parameters at the same points.
//
// # Checkpoints
//
// With algo.Runtime.Checkpoints every policy saves its whole state at the
// same joint step, where every policy ends an iteration, and the run's
// checkpoint holds them all with the envs' state; a resumed run ends with
// the bits of the run that never stopped (joint.go).
//
// Algorithms whose local Train builds its envs through Runtime.MakeEnvs
// (PPO, A2C, DQN, SAC, TD3, DDPG) can be several policies; one that builds
// its own (A3C and IMPALA, whose Train runs a flow plan) is refused.
package multipolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"herd/algo"
	"herd/env"
)

// Train trains the policies of rt.Header.MultiAgent with spec's local
// Train, with algo.Executor's contract: on cancellation every policy stops
// at its next step boundary and the policies trained so far are returned
// with ctx's error.
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
	h := rt.Header
	ma := h.MultiAgent
	agents, of, _, err := ma.PolicyAgents(h.Envs, h.Env)
	if err != nil {
		return nil, fmt.Errorf("multipolicy: %w", err)
	}
	nPol, nAgents := len(ma.Policies), len(agents)
	perEnv := make([]int, nPol) // agents of policy k per env
	for _, k := range of {
		perEnv[k]++
	}

	// Each policy's header and config, and the budget in joint steps.
	headers := make([]algo.Header, nPol)
	specs := make([]algo.Spec, nPol)
	cfgs := make([]algo.Config, nPol)
	for k := range nPol {
		if headers[k], specs[k], cfgs[k], err = algo.PolicyRun(h, spec, cfg, rt.Others, k, perEnv[k], nAgents); err != nil {
			return nil, err
		}
	}
	rows0, ok := algo.NumEnvs(cfgs[0])
	if !ok {
		return nil, fmt.Errorf("%w: multipolicy: %s has no num_envs setting", algo.ErrConfig, spec.Name)
	}
	numEnvs := rows0 / perEnv[0] // envs stepped together
	totalRows := numEnvs * nAgents
	// Whole rollouts of every on-policy policy (the least common
	// multiple of their num_steps).
	unit := int64(1)
	for _, c := range cfgs {
		if shape, ok := c.(algo.Rollout); ok {
			_, t, _ := shape.RolloutShape()
			unit = unit / gcd(unit, int64(t)) * int64(t)
		}
	}
	jointSteps := h.Steps / int64(totalRows) / unit * unit
	if jointSteps < 1 {
		return nil, fmt.Errorf("%w: multipolicy: steps %d is less than one step of every row (%d) or one rollout", algo.ErrConfig, h.Steps, totalRows)
	}
	for k := range nPol {
		headers[k].Steps = jointSteps * int64(numEnvs*perEnv[k])
		if specs[k].Train == nil {
			return nil, fmt.Errorf("%w: multipolicy: policy %s: %s cannot train", algo.ErrConfig, ma.Policies[k], specs[k].Name)
		}
		if err := cfgs[k].Validate(headers[k]); err != nil {
			return nil, fmt.Errorf("multipolicy: policy %s: %w", ma.Policies[k], err)
		}
	}

	// The envs, cut into one part per policy.
	rows := make([][]int, nPol)
	for i := range numEnvs {
		for j := range nAgents {
			rows[of[j]] = append(rows[of[j]], i*nAgents+j)
		}
	}
	// Each policy acts with a network of its own agents' action space
	// (its part's ActionSpace).
	v, err := h.Envs.MakeVector(h.Env, totalRows, env.Sync, env.WithEpisodeStatistics(), env.WithAgentActionSpaces())
	if err != nil {
		return nil, fmt.Errorf("multipolicy: %w", err)
	}
	v = algo.TeamLog(v, rt.Log) // under the split's lock, as onRound
	x := &exec{log: rt.Log, rt: rt, ids: ma.Policies, agents: agents, of: of, totalRows: int64(totalRows),
		models: make([]algo.Model, nPol), logs: make([]*policyLog, nPol), v: v, unit: unit}
	for k := range nPol {
		x.logs[k] = &policyLog{prefix: "policy/" + ma.Policies[k] + "/", rows: int64(len(rows[k])), totalRows: int64(totalRows)}
	}
	// Checkpoints: every policy's at one joint step (joint.go).
	pctx := ctx
	var pck []*algo.Checkpoints
	if ck := rt.Checkpoints; ck != nil {
		if pck, err = x.checkpoints(ck, numEnvs); err != nil {
			v.Close()
			return nil, fmt.Errorf("multipolicy: %w", err)
		}
		var cancel context.CancelCauseFunc
		pctx, cancel = context.WithCancelCause(context.WithoutCancel(ctx))
		defer cancel(nil)
		x.cancel, x.runCtx = cancel, ctx
		defer context.AfterFunc(ctx, x.diverged)()
	}
	parts, err := env.SplitVector(v, rows, x.onRound)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("multipolicy: %w", err)
	}

	made := make([]bool, nPol)
	errs := make([]error, nPol)
	var wg sync.WaitGroup
	for k := range nPol {
		prt := &algo.Runtime{Header: headers[k], Log: x.logs[k],
			OnTrack: func(m algo.Model) { x.models[k] = m },
			Envs: func(n int) (env.Vector, error) {
				if made[k] || n != len(rows[k]) {
					return nil, fmt.Errorf("multipolicy: policy %s asked for %d envs (call %v); it has %d rows", ma.Policies[k], n, made[k], len(rows[k]))
				}
				made[k] = true
				return parts[k], nil
			}}
		if pck != nil {
			prt.Checkpoints = pck[k]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer parts[k].Close() // the others then stop instead of waiting for it
			m, err := specs[k].Train(pctx, prt, cfgs[k])
			if m != nil {
				x.models[k] = m
			}
			errs[k] = err
		}()
	}
	wg.Wait()
	x.flush()
	rt.Log.Step(x.stepsDone)

	var failed []error
	for k, err := range errs {
		switch {
		case err == nil && !made[k]:
			failed = append(failed, fmt.Errorf("%w: multipolicy: %s does not train on the envs its Runtime hands it (Runtime.MakeEnvs), so it cannot be one of several policies", algo.ErrConfig, specs[k].Name))
		case err != nil && !errors.Is(err, env.ErrPartEnded):
			failed = append(failed, fmt.Errorf("policy %s: %w", ma.Policies[k], err))
		}
	}
	if len(failed) == 0 {
		for k, err := range errs { // only ended parts: report them
			if err != nil {
				failed = append(failed, fmt.Errorf("policy %s: %w", ma.Policies[k], err))
			}
		}
	}
	for _, m := range x.models {
		if m == nil {
			return nil, errors.Join(append(failed, errors.New("multipolicy: a policy returned no model"))...)
		}
	}
	model := x.policies()
	if x.failed != nil {
		return model, x.failed
	}
	if ctx.Err() != nil {
		return model, ctx.Err()
	}
	return model, errors.Join(failed...)
}

// exec is the state the parts share; onRound and flush run only while
// every policy's goroutine waits inside its env step (or has ended).
type exec struct {
	log       algo.Logger
	rt        *algo.Runtime
	ids       []string
	agents    []string
	of        []int
	models    []algo.Model
	logs      []*policyLog
	totalRows int64
	stepsDone int64
	tracked   bool

	// Checkpoints (joint.go).
	v       env.Vector // the whole vector the parts split
	unit    int64      // joint steps at which every policy ends an iteration
	runCtx  context.Context
	cancel  context.CancelCauseFunc // the policies' context's
	restore func() error
	failed  error // a restore that failed in onRound
	joint   joint
}

func (x *exec) policies() *algo.Policies {
	return &algo.Policies{IDs: x.ids, Models: slices.Clone(x.models), Agents: x.agents, Of: x.of}
}

// onRound hands the policies' held-back metrics to the run's logger and
// advances its step, before the joint step is taken.
func (x *exec) onRound(reset bool) {
	x.barrier(reset)
	if !x.tracked && !slices.Contains(x.models, nil) {
		x.tracked = true
		x.rt.Track(x.policies())
	}
	x.flush()
	x.log.Step(x.stepsDone)
	if !reset {
		x.stepsDone += x.totalRows
	}
}

// flush hands every policy's held-back calls to the run's logger, policy
// by policy in order.
func (x *exec) flush() {
	for _, l := range x.logs {
		ended := false
		for _, c := range l.pending {
			if c.name == "" {
				x.log.Episode(c.step, c.value, c.length)
				l.episodes.Add(c.value, c.length)
				ended = true
				continue
			}
			x.log.Scalar(l.prefix+c.name, c.value)
		}
		l.pending = l.pending[:0]
		if ended {
			l.episodes.Log(x.log, l.prefix)
		}
	}
}

// policyLog is policy k's Logger: it holds the calls back until the next
// joint step (exec.flush) and turns the policy's own step counts (its
// rows only) into the run's (every row).
type policyLog struct {
	prefix          string
	rows, totalRows int64
	pending         []call
	episodes        algo.PolicyEpisodes
}

type call struct {
	name   string // "" for an episode
	value  float64
	step   int64
	length int
}

func (l *policyLog) Episode(step int64, ret float64, length int) {
	l.pending = append(l.pending, call{value: ret, step: step / l.rows * l.totalRows, length: length})
}

func (l *policyLog) Scalar(name string, value float64) {
	l.pending = append(l.pending, call{name: name, value: value})
}

// Step is the run's business: the joint steps drive its rows.
func (l *policyLog) Step(int64) {}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
