package algo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"herd/env"
	"herd/internal/atomicfile"
	"herd/internal/trainstate"
	"herd/metrics"
	"herd/nn"

	"go.yaml.in/yaml/v4"
)

// MultiAgentConfig is the `multiagent:` section of a run config: several
// policies in one multi-agent env, each trained on its own agents' rows
// (RLlib's multiagent config with a declarative policy_mapping_fn).
//
//	env: mpe/simple_tag_v3?agent_id=true
//	multiagent:
//	  policies: [adversary, good]
//	  policy_mapping:
//	    adversary_*: adversary   # path.Match pattern or agent name
//	    agent_0: good
//
// Every policy is an instance of the run's algorithm (or of the one Algos
// names for it) with its section's settings, except num_envs: that counts the rows of all agents (envs ×
// agents, as with one shared policy), and policy k gets envs × (its
// agents) of them. Each policy has its own parameters, optimizer, learner
// and random streams (policy k's come from run seed + k; the envs are
// reset from policy 0's, so from the run seed), and sees only its agents'
// rows. Left out, one policy acts for every agent.
type MultiAgentConfig struct {
	// Policies are the policy ids, in order (letters, digits, _ and -).
	Policies []string `yaml:"policies,omitempty"`
	// PolicyMapping maps agent names, or path.Match patterns of them, to
	// policy ids. An agent named exactly takes that entry; otherwise
	// every pattern it matches must name the same policy. Every agent
	// needs a policy and every policy an agent.
	PolicyMapping map[string]string `yaml:"policy_mapping,omitempty"`
	// Algos names, for some policies, an algorithm other than the run's
	// (policy id → algorithm); that algorithm's section configures them,
	// and its num_envs must equal the run's section's (both count every
	// agent's rows). RLlib Flow's twin trainer is algos: {good: dqn}
	// in a PPO run.
	Algos map[string]string `yaml:"algos,omitempty"`
}

// Enabled reports whether the run has a policy mapping.
func (m MultiAgentConfig) Enabled() bool { return len(m.Policies) > 0 || len(m.PolicyMapping) > 0 }

var policyIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate checks the section without the env (Map checks the agents).
func (m MultiAgentConfig) Validate() error {
	if !m.Enabled() {
		return nil
	}
	var errs []error
	if len(m.Policies) == 0 {
		errs = append(errs, fmt.Errorf("%w: multiagent.policy_mapping needs multiagent.policies", ErrConfig))
	}
	for i, id := range m.Policies {
		if !policyIDRe.MatchString(id) {
			errs = append(errs, fmt.Errorf("%w: multiagent.policies: id %q: use letters, digits, _ and -", ErrConfig, id))
		}
		if slices.Contains(m.Policies[:i], id) {
			errs = append(errs, fmt.Errorf("%w: multiagent.policies: id %q is listed twice", ErrConfig, id))
		}
	}
	keys := make([]string, 0, len(m.PolicyMapping))
	for k := range m.PolicyMapping {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := path.Match(k, ""); err != nil {
			errs = append(errs, fmt.Errorf("%w: multiagent.policy_mapping: pattern %q: %w", ErrConfig, k, err))
		}
		if id := m.PolicyMapping[k]; !slices.Contains(m.Policies, id) {
			errs = append(errs, fmt.Errorf("%w: multiagent.policy_mapping: %s maps to %q, which is not in multiagent.policies %v", ErrConfig, k, id, m.Policies))
		}
	}
	for _, id := range sortedKeys(m.Algos) {
		if !slices.Contains(m.Policies, id) {
			errs = append(errs, fmt.Errorf("%w: multiagent.algos: %q is not in multiagent.policies %v", ErrConfig, id, m.Policies))
		}
	}
	if len(m.Policies) > 0 && len(m.PolicyMapping) == 0 {
		errs = append(errs, fmt.Errorf("%w: multiagent.policies needs multiagent.policy_mapping (agent or pattern: policy id)", ErrConfig))
	}
	return errors.Join(errs...)
}

// Map returns, for each of agents, the index in Policies of its policy.
func (m MultiAgentConfig) Map(agents []string) ([]int, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m.PolicyMapping))
	for k := range m.PolicyMapping {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]int, len(agents))
	used := make([]bool, len(m.Policies))
	var errs []error
	for j, a := range agents {
		id, exact := m.PolicyMapping[a]
		if !exact {
			var from string
			for _, k := range keys {
				if ok, _ := path.Match(k, a); !ok {
					continue
				}
				if id != "" && m.PolicyMapping[k] != id {
					errs = append(errs, fmt.Errorf("%w: multiagent.policy_mapping: agent %s matches %s (%s) and %s (%s)",
						ErrConfig, a, from, id, k, m.PolicyMapping[k]))
					break
				}
				id, from = m.PolicyMapping[k], k
			}
		}
		if id == "" {
			errs = append(errs, fmt.Errorf("%w: multiagent.policy_mapping: agent %s has no policy (agents: %v)", ErrConfig, a, agents))
			continue
		}
		out[j] = slices.Index(m.Policies, id)
		used[out[j]] = true
	}
	for k, u := range used {
		if !u && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("%w: multiagent: policy %s acts for no agent of %v", ErrConfig, m.Policies[k], agents))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// PolicyAgents makes the multi-agent env envID once and returns its
// possible agents, the index in m.Policies of each agent's policy (Map)
// and each policy's action space. The agents of one policy must share
// one action space (one network acts for all of them); policies may
// differ: each policy's network is sized to its own agents' space.
func (m MultiAgentConfig) PolicyAgents(mk env.Maker, envID string) (agents []string, of []int, acts []env.Space, err error) {
	p, err := mk.MakeParallel(envID)
	if err != nil {
		return nil, nil, nil, err
	}
	defer p.Close()
	agents = slices.Clone(p.PossibleAgents())
	if of, err = m.Map(agents); err != nil {
		return nil, nil, nil, err
	}
	acts = make([]env.Space, len(m.Policies))
	first := make([]string, len(m.Policies))
	var errs []error
	for j, a := range agents {
		sp, err := p.ActionSpace(a)
		if err != nil {
			return nil, nil, nil, err
		}
		k := of[j]
		switch {
		case acts[k] == nil:
			acts[k], first[k] = sp, a
		case sp.String() != acts[k].String():
			errs = append(errs, fmt.Errorf("%w: multiagent: policy %s acts for agents %s (action space %v) and %s (%v): one policy's agents need one action space; map them to different policies",
				ErrConfig, m.Policies[k], first[k], acts[k], a, sp))
		}
	}
	if len(errs) > 0 {
		return nil, nil, nil, errors.Join(errs...)
	}
	return agents, of, acts, nil
}

// PolicyScalars are the metrics.csv columns of a run with several
// policies: for each policy, its agents' mean episode return and length
// over their last metrics.Window episodes, its episode count, and the
// algorithm's own scalars, each named policy/<id>/<name>
// (summary.json's "policies" holds their last values), then extra, the
// columns the executor adds for each policy (Executor.Scalars).
func PolicyScalars(h Header, spec Spec, others map[string]AlgoConfig, extra []string) []string {
	var out []string
	for _, id := range h.MultiAgent.Policies {
		sc := spec.Scalars
		if o, ok := others[h.MultiAgent.Algos[id]]; ok {
			sc = o.Spec.Scalars
		}
		sc = append(slices.Clone(sc), extra...)
		for _, s := range append([]string{"return_mean", "length_mean", "episodes"}, sc...) {
			out = append(out, "policy/"+id+"/"+s)
		}
	}
	return out
}

// PolicyEpisodes keeps one policy's episode columns of PolicyScalars:
// its agents' mean episode return and length over their last
// metrics.Window episodes, and its episode count.
type PolicyEpisodes struct {
	rets, lens []float64
	count      int64
}

// Add records one of the policy's agents' ended episodes.
func (p *PolicyEpisodes) Add(ret float64, length int) {
	if len(p.rets) == metrics.Window {
		p.rets, p.lens = p.rets[1:], p.lens[1:]
	}
	p.rets, p.lens = append(p.rets, ret), append(p.lens, float64(length))
	p.count++
}

// Log passes the columns to log, each named prefix+column
// (prefix "policy/<id>/").
func (p *PolicyEpisodes) Log(log Logger, prefix string) {
	ret, _ := MeanStd(p.rets)
	length, _ := MeanStd(p.lens)
	log.Scalar(prefix+"return_mean", ret)
	log.Scalar(prefix+"length_mean", length)
	log.Scalar(prefix+"episodes", float64(p.count))
}

// MarshalBinary saves the columns' state, for a checkpoint of the run.
func (p *PolicyEpisodes) MarshalBinary() ([]byte, error) {
	b := binary.LittleEndian.AppendUint64(nil, uint64(p.count))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(p.rets)))
	for i := range p.rets {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.rets[i]))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.lens[i]))
	}
	return b, nil
}

// UnmarshalBinary restores what MarshalBinary saved.
func (p *PolicyEpisodes) UnmarshalBinary(b []byte) error {
	if len(b) < 16 {
		return fmt.Errorf("%w: policy episodes: %d bytes", trainstate.ErrCorrupt, len(b))
	}
	n := binary.LittleEndian.Uint64(b[8:])
	if n > metrics.Window || uint64(len(b)) != 16+16*n {
		return fmt.Errorf("%w: policy episodes: %d bytes for %d episodes", trainstate.ErrCorrupt, len(b), n)
	}
	p.count = int64(binary.LittleEndian.Uint64(b))
	p.rets, p.lens = make([]float64, n), make([]float64, n)
	for i := range p.rets {
		p.rets[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[16+16*i:]))
		p.lens[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[24+16*i:]))
	}
	return nil
}

// AlgoConfig is an algorithm and its configuration: those of the policies
// of a multiagent section that another algorithm than the run's trains
// (MultiAgentConfig.Algos).
type AlgoConfig struct {
	Spec   Spec
	Config Config
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// AgentPolicy is a Policy that acts differently for different agents of a
// multi-agent env (several policies): Evaluate and EvaluateAgents call
// ActAgent with the agent whose turn it is.
type AgentPolicy interface {
	Policy
	ActAgent(dst, obs []float32, agent string) []float32
}

// Policies is the model of a run with several policies: policy
// Models[Of[j]] acts for agent Agents[j].
type Policies struct {
	IDs    []string
	Models []Model
	Agents []string
	Of     []int
}

// Act acts as the first agent's policy; multi-agent evaluation calls
// ActAgent, which picks the agent's own.
func (p *Policies) Act(dst, obs []float32) []float32 { return p.Models[p.Of[0]].Act(dst, obs) }

// ActAgent acts with agent's policy (the first policy for an unknown name).
func (p *Policies) ActAgent(dst, obs []float32, agent string) []float32 {
	j := max(slices.Index(p.Agents, agent), 0)
	return p.Models[p.Of[j]].Act(dst, obs)
}

// Params are every policy's parameters, in policy order (ParamModel),
// when every policy exposes them; else nil.
func (p *Policies) Params() []*nn.Param {
	var out []*nn.Param
	for _, m := range p.Models {
		pm, ok := m.(ParamModel)
		if !ok {
			return nil
		}
		out = append(out, pm.Params()...)
	}
	return out
}

// Save writes one safetensors file holding every policy's tensors, each
// named <id>/<its own name>, and their metadata likewise prefixed;
// metadata herd.policies lists the ids (LoadPolicies reads it back).
func (p *Policies) Save(file string) error {
	tensors := map[string]nn.Tensor{}
	md := map[string]string{"herd.policies": strings.Join(p.IDs, ",")}
	for k, m := range p.Models {
		tmp := filepath.Join(filepath.Dir(file), fmt.Sprintf(".policy-%d-%s", k, filepath.Base(file)))
		err := m.Save(tmp)
		var b []byte
		if err == nil {
			b, err = os.ReadFile(tmp)
		}
		os.Remove(tmp)
		if err != nil {
			return fmt.Errorf("algo: save policy %s: %w", p.IDs[k], err)
		}
		ck, err := nn.ReadSafetensors(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("algo: save policy %s: %w", p.IDs[k], err)
		}
		for name, t := range ck.Tensors {
			tensors[p.IDs[k]+"/"+name] = t
		}
		for key, v := range ck.Metadata {
			md[p.IDs[k]+"/"+key] = v
		}
	}
	return atomicfile.Write(file, 0o644, func(w io.Writer) error { return nn.WriteSafetensors(w, tensors, md) })
}

// PolicyRun is policy k's share of a run with several policies: its header
// (seed + k, steps and out of its own) and its config (num_envs = envs ×
// its agents).
func PolicyRun(h Header, spec Spec, cfg Config, others map[string]AlgoConfig, k, rowsOfPolicy, rowsPerEnv int) (Header, Spec, Config, error) {
	hk, sk, ck, err := policyRun(h, spec, cfg, others, k, rowsOfPolicy, rowsPerEnv)
	if err != nil {
		return Header{}, Spec{}, nil, fmt.Errorf("policy %s: %w", h.MultiAgent.Policies[k], err)
	}
	return hk, sk, ck, nil
}

func policyRun(h Header, spec Spec, cfg Config, others map[string]AlgoConfig, k, rowsOfPolicy, rowsPerEnv int) (Header, Spec, Config, error) {
	var err error
	hk := h
	hk.MultiAgent = MultiAgentConfig{}
	hk.Seed = h.Seed + uint64(k)
	if name := h.MultiAgent.Algos[h.MultiAgent.Policies[k]]; name != "" && name != spec.Name {
		o, ok := others[name]
		if !ok {
			return Header{}, Spec{}, nil, fmt.Errorf("%w: algorithm %s has no section in the run", ErrConfig, name)
		}
		n, ok1 := NumEnvs(cfg)
		on, ok2 := NumEnvs(o.Config)
		if ok1 && ok2 && n != on {
			return Header{}, Spec{}, nil, fmt.Errorf("%w: %s.num_envs %d must equal %s.num_envs %d: both count every agent's rows", ErrConfig, name, on, spec.Name, n)
		}
		hk.Algo, spec, cfg = name, o.Spec, o.Config
	}
	if hk.Env, err = policyEnv(h.Envs, h.Env, h.MultiAgent, k); err != nil {
		return Header{}, Spec{}, nil, err
	}
	hk2, ck, err := policyConfig(hk, spec, cfg, k, rowsOfPolicy, rowsPerEnv)
	return hk2, spec, ck, err
}

// policyEnv is the env id of policy k's header: envID, or, when the env's
// agents have different action spaces, envID with act_as naming policy
// k's first agent (env.FlatOptions.ActAs), so that what builds a network
// from env.Make(id) (an algorithm's Validate, its LoadPolicy) sees policy
// k's own action space. A remote id takes act_as as a local one does:
// it stays on this side (the server serves the whole env).
func policyEnv(mk env.Maker, envID string, m MultiAgentConfig, k int) (string, error) {
	if !mk.IsParallel(envID) {
		return envID, nil
	}
	agents, of, acts, err := m.PolicyAgents(mk, envID)
	if err != nil {
		return "", err
	}
	mixed := false
	for _, a := range acts {
		mixed = mixed || a.String() != acts[0].String()
	}
	if !mixed {
		return envID, nil
	}
	sep := "?"
	if strings.Contains(envID, "?") {
		sep = "&"
	}
	return envID + sep + "act_as=" + url.QueryEscape(agents[slices.Index(of, k)]), nil
}

func policyConfig(hk Header, spec Spec, cfg Config, k, rowsOfPolicy, rowsPerEnv int) (Header, Config, error) {
	b, err := yaml.Dump(cfg)
	if err != nil {
		return Header{}, nil, err
	}
	ck := spec.NewConfig()
	if err := yaml.Load(b, ck, yaml.WithKnownFields()); err != nil {
		return Header{}, nil, fmt.Errorf("algo: policy %d config: %w", k, err)
	}
	if n, ok := NumEnvs(ck); ok {
		if n%rowsPerEnv != 0 {
			return Header{}, nil, fmt.Errorf("%w: num_envs %d is not a whole number of envs of %d agents", ErrConfig, n, rowsPerEnv)
		}
		if err := Set(ck, fmt.Sprintf("num_envs=%d", n/rowsPerEnv*rowsOfPolicy)); err != nil {
			return Header{}, nil, err
		}
	}
	return hk, ck, nil
}

// LoadPolicies loads a checkpoint written by Policies.Save for a run with
// a multiagent section: each policy through spec.LoadPolicy with its own
// header and config (PolicyRun).
func LoadPolicies(file string, res *Resolved) (*Policies, error) {
	h, spec, cfg := res.Header, res.Spec, res.Config
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	ck, err := nn.ReadSafetensors(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, file, err)
	}
	if got, want := ck.Metadata["herd.policies"], strings.Join(h.MultiAgent.Policies, ","); got != want {
		return nil, fmt.Errorf("%w: %s holds policies %q, the run names %q", ErrCheckpoint, file, got, want)
	}
	agents, of, _, err := h.MultiAgent.PolicyAgents(h.Envs, h.Env)
	if err != nil {
		return nil, err
	}
	out := &Policies{IDs: h.MultiAgent.Policies, Agents: agents, Of: of}
	for k, id := range out.IDs {
		tensors, md := map[string]nn.Tensor{}, map[string]string{}
		for name, t := range ck.Tensors {
			if n, ok := strings.CutPrefix(name, id+"/"); ok {
				tensors[n] = t
			}
		}
		for key, v := range ck.Metadata {
			if n, ok := strings.CutPrefix(key, id+"/"); ok {
				md[n] = v
			}
		}
		tmp, err := os.CreateTemp("", "herd-policy-*.safetensors")
		if err != nil {
			return nil, err
		}
		err = nn.WriteSafetensors(tmp, tensors, md)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		var m Policy
		if err == nil {
			hk, sk, cfgk, perr := PolicyRun(h, spec, cfg, res.Others, k, 1, 1)
			if err = perr; err == nil {
				m, err = sk.LoadPolicy(tmp.Name(), hk, cfgk)
			}
		}
		os.Remove(tmp.Name())
		if err != nil {
			return nil, fmt.Errorf("algo: load policy %s: %w", id, err)
		}
		out.Models = append(out.Models, loadedModel{m})
	}
	return out, nil
}

// loadedModel is a loaded Policy in a Policies (which holds Models);
// saving it again is not supported.
type loadedModel struct{ Policy }

func (loadedModel) Save(string) error {
	return errors.New("algo: a loaded policy is not saved again")
}

// NumEnvs reads the num_envs setting of an algorithm's config.
func NumEnvs(cfg Config) (int, bool) {
	n, ok := intKey(cfg, "num_envs")
	return int(n), ok
}
