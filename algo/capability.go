package algo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Capability is one thing an algorithm's pieces can do, as its Spec
// declares it (Spec.Can). Executors state what they need in the same terms
// (Executor.Needs), and Admit decides from the two whether an executor
// runs an algorithm and, when not, says why. A set of capabilities is the
// bitwise or of its members.
type Capability uint32

// The capabilities. Each says which pieces and config methods an executor
// may rely on; algo/all's contract test checks every Spec's declaration
// against what its pieces implement.
const (
	// CanSegmentLearner: the algorithm trains by one SegmentLearner.Learn per
	// on-policy segment of num_envs × num_steps that an executor gathers:
	// Pieces.NewSegmentLearner (a Modeler), policy and sampler pieces, and
	// a config that is a Rollout.
	CanSegmentLearner Capability = 1 << iota
	// CanTransitionLearner: the algorithm trains from a replay on the
	// env-step clock: Pieces.OffPolicy with a TransitionLearner (a
	// Modeler) and a replay safe to share (ForkReplay), and a config that
	// is a TransitionShape.
	CanTransitionLearner
	// CanGradApply: an update can be cut into a gradient step, which several
	// learners or workers compute, and an apply step (SplitLearner for a
	// transition learner; ComputeGradients/ApplyGradients for a segment
	// learner, A3C's workers).
	CanGradApply
	// CanDataParallel: the segment learner can be one of M data-parallel
	// learners (DataParallel, and a config that is a Minibatcher).
	CanDataParallel
	// CanBehaviourLogProbs: the learner weighs its policy gradient with the
	// behaviour log-probabilities the sampler recorded in the segment
	// (PPO's ratio, IMPALA's V-trace), so data gathered with older weights
	// is corrected, not taken as on-policy.
	CanBehaviourLogProbs
	// CanAgentRows: Spec.Train trains on the envs Runtime.MakeEnvs hands it,
	// so it can be one of several policies, each on its agents' rows.
	CanAgentRows
	// CanPlan: the config describes an asynchronous dataflow plan
	// (AsyncPlanner), which the flow executor builds (flow.AsyncPlan).
	CanPlan
	// CanStatelessPolicy: the policy's row for an observation depends on
	// that observation and the weights alone, so an executor may act
	// anywhere (a policy worker, a slot per env, another process) without
	// keeping a state per env. A recurrent config lacks it (Limiter).
	CanStatelessPolicy
	// CanCarriedState: the policy's state per env, if it has one, can be
	// set before a forward pass and read after it (StatefulPolicy), so an
	// executor can keep each env's state with the env and hand it to
	// wherever the policy acts (a policy worker, an inline copy).
	CanCarriedState

	capEnd
)

// capabilityNames are the one-line names of the capabilities, in bit
// order, as refusals and the matrix table print them.
func capabilityNames() []string {
	return []string{"a segment learner", "a transition learner", "a gradient/apply split", "a data-parallel learner",
		"behaviour log-probs", "multi-agent rows", "a dataflow plan", "a stateless policy", "a carried policy state"}
}

// Capabilities lists every single capability, in order.
func Capabilities() []Capability {
	var out []Capability
	for c := Capability(1); c < capEnd; c <<= 1 {
		out = append(out, c)
	}
	return out
}

// Has reports whether c holds every capability of want.
func (c Capability) Has(want Capability) bool { return c&want == want }

// String names the capabilities of c joined by commas ("a segment
// learner, a dataflow plan"); "nothing an executor needs" for none.
func (c Capability) String() string {
	names := capabilityNames()
	var parts []string
	for i, one := range Capabilities() {
		if c.Has(one) {
			parts = append(parts, names[i])
		}
	}
	if len(parts) == 0 {
		return "nothing an executor needs"
	}
	return strings.Join(parts, ", ")
}

// Limiter is implemented by a config that takes capabilities away from its
// algorithm's Spec.Can (a recurrent network): Lacks is what this config
// cannot do, and why, and Admit judges the run on what remains.
type Limiter interface {
	Lacks() (Capability, string)
}

// Effective is spec with the capabilities cfg lacks (Limiter) removed.
func Effective(spec Spec, cfg Config) Spec {
	if l, ok := cfg.(Limiter); ok {
		lacks, _ := l.Lacks()
		spec.Can &^= lacks
	}
	return spec
}

// Modeler is a learner that hands out the model it trains (to save,
// evaluate and watch for divergence). Every learner of a SegmentLearner or
// TransitionLearner algorithm is one.
type Modeler interface {
	Model() Model
}

// Rollout is the config of a SegmentLearner algorithm: the envs stepped
// together, the segment length T and the discount of the truncation
// bootstrap.
type Rollout interface {
	RolloutShape() (numEnvs, numSteps int, gamma float32)
}

// AsyncPlanner is the config of an algorithm written as an asynchronous
// dataflow plan (CanPlan: A3C, IMPALA). The algorithm declares the plan's
// shape; package flow builds it (flow.AsyncPlan), so the algorithm
// imports no executor.
type AsyncPlanner interface {
	AsyncPlan() AsyncPlan
}

// AsyncPlan is the shape of an asynchronous plan. Its rollout workers step
// NumEnvs envs in all, in segments of NumSteps steps with the discount
// Gamma of the truncation bootstrap, and keep NumAsync items each in
// flight; an item is learned at most MaxPolicyLag learner updates after
// the weights it was made with (0: the least bound, NumAsync × workers − 1,
// under which items are learned in the order they were asked for). With
// Gradients each worker sends the gradient of the segment learner's loss
// on its segment, computed on its own learner copy, and the driver applies
// it (A3C); without, the worker sends the segment and the learner takes
// one update on it (IMPALA).
type AsyncPlan struct {
	NumEnvs, NumSteps      int
	Gamma                  float32
	NumAsync, MaxPolicyLag int
	Gradients              bool
}

// Need is one way an executor can run an algorithm: Topology names it
// when the executor has several ("on-policy topology"), and the algorithm
// must have every capability of Caps.
type Need struct {
	Topology string
	Caps     Capability
}

// LocalExecutor is the name under which an algorithm's own Train
// (Spec.Train) runs: the default runtime.executor.
const LocalExecutor = "local"

// Executor describes one way to run an algorithm's pieces: what it needs
// of the algorithm, the runtime: keys it owns, and how it trains. Package
// run lists herd's (run.Executors); an executor states its own needs and
// keys, and Admit derives acceptance and every refusal from them.
type Executor struct {
	// Name is the value of runtime.executor.
	Name string
	// Doc is a one-line description for the CLI's help and the docs.
	Doc string
	// Keys are the runtime: keys the executor reads (besides executor
	// and replay_locking, which every run may set). Any other key that a
	// config sets is refused, naming the executor's own.
	Keys []string
	// Needs returns what the executor needs for a run with header h: the
	// algorithm must meet one of them. nil: any algorithm.
	Needs func(h Header) []Need
	// Requires are the capabilities every run under the executor needs,
	// whatever its topology (CanStatelessPolicy where policy copies act
	// away from a per-env state).
	Requires Capability
	// Policies: the executor trains the several policies of a multiagent
	// section.
	Policies bool
	// Check, when not nil, reports the executor's own rules over its keys
	// (each error wrapping ErrConfig). It must not modify h.
	Check func(h Header) error
	// Scalars, when not nil, returns the metrics.csv columns the executor
	// adds after the algorithm's own (each policy's, under a multiagent
	// section).
	Scalars func(h Header) []string
	// Workers, when not nil, returns the executor's workers that each
	// hold envs or a policy copy of their own, for the memory estimate.
	Workers func(h Header) []WorkerSet
	// Train runs the algorithm, with Spec.Train's contract.
	Train func(ctx context.Context, rt *Runtime, spec Spec, cfg Config) (Model, error)
	// Resumable: Train saves the whole state of a run of an algorithm
	// with Spec.Resumable at Runtime.Checkpoints and continues from a
	// restored one, as the local executor does (`herd train --resume`).
	Resumable bool
	// NotResumable, when set, says why a run of spec with header h writes
	// no checkpoints under a Resumable executor ("" when it does): a
	// topology of the executor that saves no state.
	NotResumable func(h Header, spec Spec) string
}

// WorkerSet is N workers of an executor, counted by runtime key Key, each
// stepping num_envs envs of its own (Envs) or holding a policy copy
// (Policy): the first is counted with the run, the others add memory.
type WorkerSet struct {
	Key          string
	N            int
	Envs, Policy bool
	// Learner: each worker beyond the first holds a whole learner (its
	// networks, gradients and optimizer state).
	Learner bool
}

// WorkersOf returns ex's worker sets for a run with header h.
func WorkersOf(ex Executor, h Header) []WorkerSet {
	if ex.Workers == nil {
		return nil
	}
	return ex.Workers(h)
}

// commonKeys are the runtime keys every run may set.
func commonKeys() []string { return []string{"executor", "replay_locking"} }

// FindExecutor returns the executor named name among exs.
func FindExecutor(exs []Executor, name string) (Executor, bool) {
	for _, e := range exs {
		if e.Name == name {
			return e, true
		}
	}
	return Executor{}, false
}

// Refusal says why executor ex cannot run spec for a run with header h,
// in one line ("executor pal needs a transition learner; impala has
// behaviour log-probs, a dataflow plan"); "" when it can.
func Refusal(ex Executor, h Header, spec Spec) string {
	if h.MultiAgent.Enabled() && !ex.Policies {
		return fmt.Sprintf("executor %s does not train several policies (a multiagent section)", ex.Name)
	}
	var needs []Need
	if ex.Needs != nil {
		needs = ex.Needs(h)
	}
	met := len(needs) == 0
	for _, n := range needs {
		met = met || spec.Can.Has(n.Caps)
	}
	if !met {
		return fmt.Sprintf("executor %s needs %s; %s has %s", ex.Name, needsString(needs), spec.Name, spec.Can)
	}
	if !spec.Can.Has(ex.Requires) {
		return fmt.Sprintf("executor %s needs %s for any algorithm; %s lacks %s", ex.Name, ex.Requires, spec.Name, ex.Requires&^spec.Can)
	}
	return ""
}

// needsString words needs as alternatives: "a segment learner (on-policy
// topology), or a transition learner (Ape-X topology)".
func needsString(needs []Need) string {
	alts := make([]string, len(needs))
	for i, n := range needs {
		alts[i] = n.Caps.String()
		if n.Topology != "" {
			alts[i] += " (" + n.Topology + ")"
		}
	}
	return strings.Join(alts, ", or ")
}

// Admit is the one place that decides whether executor ex runs res: the
// runtime keys the config sets must be the executor's, the executor's own
// rules must hold (Executor.Check), and the algorithm of the run and of
// every other policy (Resolved.Others) must meet one of the executor's
// needs. Each problem wraps ErrConfig.
func Admit(ex Executor, h Header, spec Spec, others map[string]AlgoConfig) error {
	var errs []error
	if err := checkKeys(ex, h.Runtime); err != nil {
		errs = append(errs, err)
	}
	if ex.Check != nil {
		if err := ex.Check(h); err != nil {
			errs = append(errs, err)
		}
	}
	specs := []Spec{spec}
	for _, name := range sortedKeys(others) {
		specs = append(specs, others[name].Spec)
	}
	for _, s := range specs {
		if r := Refusal(ex, h, s); r != "" {
			errs = append(errs, fmt.Errorf("%w: %s", ErrConfig, r))
			break
		}
	}
	return errors.Join(errs...)
}

// AdmitRun is Admit for a resolved run under the executor its header
// names, chosen from exs; an executor exs does not hold is refused,
// naming those it does.
func AdmitRun(exs []Executor, res *Resolved) (Executor, error) {
	name := res.Header.Runtime.Executor
	ex, ok := FindExecutor(exs, name)
	if !ok {
		known := make([]string, len(exs))
		for i, e := range exs {
			known[i] = e.Name
		}
		return Executor{}, fmt.Errorf("%w: runtime.executor %q is not one of %v", ErrConfig, name, known)
	}
	if err := Admit(ex, res.Header, Effective(res.Spec, res.Config), res.Others); err != nil {
		if l, ok := res.Config.(Limiter); ok && Admit(ex, res.Header, res.Spec, res.Others) == nil {
			_, why := l.Lacks()
			err = fmt.Errorf("%w (%s)", err, why)
		}
		return ex, err
	}
	if ps, ok := res.Config.(PlanSettings); ok && !runsPlan(ex, res.Header, res.Spec) {
		if keys := ps.PlanSettings(); len(keys) > 0 {
			return ex, fmt.Errorf("%w: %s: %s set only its dataflow plan, which executor %s does not run (it places the pieces itself); leave them at their defaults, or use an executor that runs the plan",
				ErrConfig, res.Spec.Name, strings.Join(keys, " and "), ex.Name)
		}
	}
	return ex, nil
}

// PlanSettings is implemented by the config of an algorithm that is a
// dataflow plan and also has pieces other executors place (IMPALA):
// PlanSettings names the keys set away from their defaults that only the
// plan reads, so that an executor placing the pieces itself refuses them
// instead of ignoring them.
type PlanSettings interface {
	PlanSettings() []string
}

// runsPlan reports whether ex runs spec's own plan: an executor without
// needs runs Spec.Train (for a plan algorithm, which has none, the local
// executor runs the plan in-process), and one with needs runs the plan
// when the first need spec meets is the plan.
func runsPlan(ex Executor, h Header, spec Spec) bool {
	var needs []Need
	if ex.Needs != nil {
		needs = ex.Needs(h)
	}
	if len(needs) == 0 {
		return true
	}
	for _, n := range needs {
		if spec.Can.Has(n.Caps) {
			return n.Caps.Has(CanPlan)
		}
	}
	return false
}

// runtimeKeys returns the yaml keys of the runtime section that rc sets
// (holds a non-zero value for), in field order.
func runtimeKeys(rc RuntimeConfig) []string {
	var out []string
	for key, f := range yamlFields(rc) {
		if !f.IsZero() {
			out = append(out, key)
		}
	}
	return out
}

// checkKeys refuses each runtime key rc sets that ex does not read.
func checkKeys(ex Executor, rc RuntimeConfig) error {
	// An executor without keys of its own reads only the common ones.
	own := "its settings: " + strings.Join(ex.Keys, ", ")
	if len(ex.Keys) == 0 {
		own = "it reads only runtime." + strings.Join(commonKeys(), " and runtime.")
	}
	var errs []error
	for _, k := range runtimeKeys(rc) {
		if slices.Contains(commonKeys(), k) || slices.Contains(ex.Keys, k) {
			continue
		}
		errs = append(errs, fmt.Errorf("%w: runtime.%s is not a setting of executor %s (%s)", ErrConfig, k, ex.Name, own))
	}
	return errors.Join(errs...)
}

// Undeclared is the error of an executor that finds spec's pieces or
// config without what spec declares (Spec.Can): a mistake in the
// algorithm, not in the run's config.
func Undeclared(spec Spec, c Capability, lacks string) error {
	return fmt.Errorf("%w: algorithm %s declares %s, but %s", ErrConfig, spec.Name, c, lacks)
}
