package all

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/flow"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
)

// TestCapabilitiesDeclared checks every algorithm's declared capabilities
// (Spec.Can) against what its config and pieces implement, so that the
// capability table — and every executor's acceptance — tells the truth:
// the interfaces each capability promises, and for behaviour log-probs and
// multi-agent rows what the learner and Train do.
func TestCapabilitiesDeclared(t *testing.T) {
	for _, s := range Specs() {
		t.Run(s.Name, func(t *testing.T) {
			h, cfg, sp := specRun(t, s)
			p, err := s.Pieces(h, cfg, sp)
			if err != nil {
				t.Fatal(err)
			}
			var seg algo.SegmentLearner
			if p.NewSegmentLearner != nil {
				if seg, err = p.NewSegmentLearner(); err != nil {
					t.Fatal(err)
				}
				defer seg.Close()
			}
			var tr algo.TransitionLearner
			forkReplay := false
			if p.NewTransitionLearner != nil {
				if tr, err = p.NewTransitionLearner(); err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				rb, err := p.NewReplay()
				if err != nil {
					t.Fatal(err)
				}
				_, forkReplay = rb.(algo.ForkReplay)
			}
			_, isRollout := cfg.(algo.Rollout)
			_, shaped := cfg.(algo.TransitionShape)
			_, minibatcher := cfg.(algo.Minibatcher)
			_, plan := cfg.(algo.AsyncPlanner)
			_, segModel := seg.(algo.Modeler)
			_, trModel := tr.(algo.Modeler)
			_, split := tr.(algo.SplitLearner)
			_, grads := seg.(flow.GradientLearner)
			_, dataParallel := seg.(algo.DataParallel)
			stateless := true // a policy without a state per env, or none to act elsewhere
			carried := false
			if p.NewPolicy != nil {
				net, err := p.NewPolicy()
				if err != nil {
					t.Fatal(err)
				}
				if k, ok := net.(rollout.StateKeeper); ok && k.StateDim() > 0 {
					stateless = false
				}
				_, carried = net.(algo.StatefulPolicy)
			}
			has := map[algo.Capability]bool{
				algo.CanSegmentLearner:    isRollout && seg != nil && segModel && p.NewPolicy != nil && p.NewSampler != nil,
				algo.CanTransitionLearner: shaped && tr != nil && trModel && forkReplay && p.NewPolicy != nil && p.NewSampler != nil,
				algo.CanGradApply:         split || grads,
				algo.CanDataParallel:      dataParallel && minibatcher,
				algo.CanBehaviourLogProbs: seg != nil && readsLogProbs(t, h, cfg, sp, p),
				algo.CanAgentRows:         trainsOnHandedEnvs(t, s, h, cfg),
				algo.CanPlan:              plan,
				algo.CanStatelessPolicy:   stateless,
				algo.CanCarriedState:      carried,
			}
			for _, c := range algo.Capabilities() {
				if s.Can.Has(c) != has[c] {
					t.Errorf("declares %s: %v; its pieces: %v", c, s.Can.Has(c), has[c])
				}
			}
		})
	}
}

// specRun returns a small run of s on CartPole, or on Pendulum when its
// defaults refuse a discrete action space.
func specRun(t *testing.T, s algo.Spec) (algo.Header, algo.Config, algo.Spaces) {
	t.Helper()
	for _, id := range []string{"CartPole-v1", "Pendulum-v1"} {
		h := algo.DefaultHeader()
		h.Algo, h.Env, h.Steps = s.Name, id, 4096
		cfg := s.NewConfig()
		e, err := env.Make(id)
		if err != nil {
			t.Fatal(err)
		}
		sp := algo.SpacesOf(e)
		e.Close()
		if cfg.Validate(h) != nil {
			continue
		}
		if _, err := s.Pieces(h, cfg, sp); err == nil {
			return h, cfg, sp
		}
	}
	t.Fatalf("%s: no classic env its defaults accept", s.Name)
	return algo.Header{}, nil, algo.Spaces{}
}

// readsLogProbs reports whether the segment learner's update depends on
// the behaviour log-probabilities recorded in the segment: two fresh
// learners learn from one gathered segment, one with its LogProbs shifted.
func readsLogProbs(t *testing.T, h algo.Header, cfg algo.Config, sp algo.Spaces, p *algo.Pieces) bool {
	t.Helper()
	n, T := shapeOf(cfg)
	envs, err := env.MakeVector(h.Env, n, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer envs.Close()
	pol, err := p.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	smp, err := p.NewSampler(n, rng.New(h.Seed, "env-worker", 0))
	if err != nil {
		t.Fatal(err)
	}
	w := rollout.NewSegments(0, envs, rollout.NewInline(pol, smp), 0.99)
	if err := w.Reset(1); err != nil {
		t.Fatal(err)
	}
	seg := sample.NewSegment(T, n, sp.Obs.Dim(), sp.Act.Dim())
	if err := w.Collect(seg); err != nil {
		t.Fatal(err)
	}
	shifted := *seg
	shifted.LogProbs = make([]float32, len(seg.LogProbs))
	for i, lp := range seg.LogProbs {
		shifted.LogProbs[i] = lp + 0.5 // a likelier behaviour: importance weights below any truncation
	}
	learn := func(s *sample.Segment) []float32 {
		l, err := p.NewSegmentLearner()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Learn(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		v := l.Weights()
		var out []float32
		for i := range v.Len() {
			out = append(out, v.Param(i).Value...)
		}
		return out
	}
	return !reflect.DeepEqual(learn(seg), learn(&shifted))
}

// shapeOf is the segment shape of an on-policy config: its rollout shape,
// or its num_envs and num_steps keys.
func shapeOf(cfg algo.Config) (numEnvs, numSteps int) {
	if r, ok := cfg.(algo.Rollout); ok {
		n, t, _ := r.RolloutShape()
		return n, t
	}
	v := reflect.ValueOf(cfg).Elem()
	return int(v.FieldByName("NumEnvs").Int()), int(v.FieldByName("NumSteps").Int())
}

// trainsOnHandedEnvs reports whether s's Train makes its envs through
// Runtime.MakeEnvs (what several policies need): handed envs that fail,
// it fails with their error.
func trainsOnHandedEnvs(t *testing.T, s algo.Spec, h algo.Header, cfg algo.Config) bool {
	t.Helper()
	errHanded := errors.New("the handed envs")
	h.Steps = 512
	rt := &algo.Runtime{Header: h, Log: algo.Discard(), Envs: func(int) (env.Vector, error) { return nil, errHanded }}
	_, err := flow.WithTrain(s).Train(context.Background(), rt, cfg)
	return errors.Is(err, errHanded)
}
