package algo

import (
	"errors"
	"strings"
	"testing"
)

// testExecutors are two executors described as package run describes its
// own: one needing a segment learner (a gradient/apply split with several
// learners), one with two topologies.
func testExecutors() []Executor {
	return []Executor{
		{Name: "seg", Keys: []string{"env_workers", "learners"}, Policies: true,
			Needs: func(h Header) []Need {
				c := CanSegmentLearner
				if h.Runtime.Learners > 1 {
					c |= CanGradApply
				}
				return []Need{{Caps: c}}
			}},
		{Name: "two", Keys: []string{"actors"},
			Needs: func(Header) []Need {
				return []Need{{Topology: "on", Caps: CanSegmentLearner}, {Topology: "off", Caps: CanTransitionLearner}}
			}},
	}
}

// TestRefusal: acceptance and the refusal's words come from the
// executor's needs and the algorithm's declared capabilities alone.
func TestRefusal(t *testing.T) {
	seg, two := testExecutors()[0], testExecutors()[1]
	h := DefaultHeader()
	on := Spec{Name: "on", Can: CanSegmentLearner | CanPlan}
	off := Spec{Name: "off", Can: CanTransitionLearner | CanGradApply}
	plan := Spec{Name: "plan", Can: CanPlan}
	for _, c := range []struct {
		ex   Executor
		spec Spec
		h    func(*Header)
		want string
	}{
		{seg, on, nil, ""},
		{seg, off, nil, "executor seg needs a segment learner; off has a transition learner, a gradient/apply split"},
		{seg, on, func(h *Header) { h.Runtime.Learners = 2 }, "executor seg needs a segment learner, a gradient/apply split; on has a segment learner, a dataflow plan"},
		{two, on, nil, ""},
		{two, off, nil, ""},
		{two, plan, nil, "executor two needs a segment learner (on), or a transition learner (off); plan has a dataflow plan"},
		{two, on, func(h *Header) { h.MultiAgent.Policies = []string{"a"} }, "executor two does not train several policies (a multiagent section)"},
		{Executor{Name: "any"}, Spec{Name: "bare"}, nil, ""},
	} {
		hc := h
		if c.h != nil {
			c.h(&hc)
		}
		if got := Refusal(c.ex, hc, c.spec); got != c.want {
			t.Errorf("%s × %s: %q, want %q", c.spec.Name, c.ex.Name, got, c.want)
		}
	}
}

// TestAdmitKeys: a runtime key the executor does not read is refused,
// naming the executor's own; its Check runs; another policy's algorithm
// must meet the needs too.
func TestAdmitKeys(t *testing.T) {
	seg := testExecutors()[0]
	seg.Check = func(h Header) error {
		if h.Runtime.EnvWorkers > 8 {
			return errors.New("too many")
		}
		return nil
	}
	on := Spec{Name: "on", Can: CanSegmentLearner}
	h := DefaultHeader()
	h.Runtime.EnvWorkers, h.Runtime.ReplayLocking = 2, "global"
	if err := Admit(seg, h, on, nil); err != nil {
		t.Fatalf("admitted keys: %v", err)
	}
	h.Runtime.Actors, h.Runtime.Alpha = 2, 4
	err := Admit(seg, h, on, nil)
	for _, want := range []string{"runtime.actors is not a setting of executor seg (its settings: env_workers, learners)", "runtime.alpha is not"} {
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("foreign keys: %v, want ErrConfig saying %q", err, want)
		}
	}
	h = DefaultHeader()
	h.Runtime.EnvWorkers = 9
	if err := Admit(seg, h, on, nil); err == nil || !strings.Contains(err.Error(), "too many") {
		t.Errorf("Check: %v", err)
	}
	h = DefaultHeader()
	h.MultiAgent.Policies = []string{"a", "b"}
	others := map[string]AlgoConfig{"off": {Spec: Spec{Name: "off", Can: CanTransitionLearner}}}
	if err := Admit(seg, h, on, others); err == nil || !strings.Contains(err.Error(), "off has a transition learner") {
		t.Errorf("another policy's algorithm: %v", err)
	}
	if _, err := AdmitRun(testExecutors(), &Resolved{Header: DefaultHeader(), Spec: on}); err == nil || !strings.Contains(err.Error(), `"local" is not one of [seg two]`) {
		t.Errorf("unknown executor: %v", err)
	}
}

// TestMatrixMarkdown: the table marks each pair and gives every refused
// pair its reason on a line of its own.
func TestMatrixMarkdown(t *testing.T) {
	m := Matrix{Executors: testExecutors(), Specs: []Spec{{Name: "on", Can: CanSegmentLearner}, {Name: "plan", Can: CanPlan}}}
	md := m.Markdown()
	for _, want := range []string{
		"| algorithm | can | seg | two |",
		"| on | a segment learner | trains | trains |",
		"| plan | a dataflow plan | refused | refused |",
		"| seg | a segment learner; with runtime.learners > 1: a segment learner, a gradient/apply split | `env_workers`, `learners` |",
		"| two | a segment learner (on), or a transition learner (off); several policies: not trained | `actors` |",
		"- plan × seg: executor seg needs a segment learner; plan has a dataflow plan",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if txt := m.Text(); !strings.Contains(txt, "  seg: .\n    needs a segment learner") || !strings.Contains(txt, "runs: on\n") {
		t.Errorf("text:\n%s", txt)
	}
}
