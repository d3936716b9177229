package algo

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"herd/env"
)

// TestMultiAgentConfig: the section survives config.yaml (Marshal and
// Resolve again), a run without it writes none, patterns map agents, and
// PolicyRun gives policy k its rows and seed.
func TestMultiAgentConfig(t *testing.T) {
	file := `algo: fake
env: mpe/simple_tag_v3
steps: 1000
multiagent:
  policies: [adv, good]
  policy_mapping: {"adversary_*": adv, agent_0: good}
fake: {num_envs: 8}
`
	r, err := Resolve([]byte(file), fakeSpecs(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Resolve(b, fakeSpecs(), Overrides{})
	if err != nil || !reflect.DeepEqual(again.Header, r.Header) {
		t.Fatalf("config.yaml does not resolve to the same header: %v\n%s", err, b)
	}
	of, err := r.Header.MultiAgent.Map([]string{"adversary_0", "adversary_1", "agent_0"})
	if err != nil || !slices.Equal(of, []int{0, 0, 1}) {
		t.Fatalf("Map: %v %v", of, err)
	}
	h, _, c, err := PolicyRun(r.Header, r.Spec, r.Config, nil, 1, 1, 4)
	if err != nil || h.Seed != r.Header.Seed+1 || h.MultiAgent.Enabled() || c.(*fakeConfig).NumEnvs != 2 || r.Config.(*fakeConfig).NumEnvs != 8 {
		t.Fatalf("PolicyRun: seed %d, num_envs %d (run's %d), %v", h.Seed, c.(*fakeConfig).NumEnvs, r.Config.(*fakeConfig).NumEnvs, err)
	}
	if _, _, _, err := PolicyRun(r.Header, r.Spec, r.Config, nil, 1, 1, 3); err == nil {
		t.Error("8 rows of 3-agent envs: no error")
	}
	single, err := Resolve([]byte("algo: fake\nenv: CartPole-v1\nsteps: 10\n"), fakeSpecs(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := single.Marshal(); strings.Contains(string(b), "multiagent") {
		t.Errorf("a run without policies writes a multiagent section:\n%s", b)
	}
}

// unreachable is a remote Opener whose server cannot be reached.
type unreachable struct{}

var errUnreachable = errors.New("connection refused")

func (unreachable) Opens(id string) bool                      { return strings.HasPrefix(id, "grpc://") }
func (unreachable) IsParallel(string) (bool, error)           { return false, errUnreachable }
func (unreachable) Make(string, env.Options) (env.Env, error) { return nil, errUnreachable }
func (unreachable) MakeVector(string, int, env.Options) (env.Vector, error) {
	return nil, errUnreachable
}
func (unreachable) MakeParallel(string, env.Options) (env.Parallel, env.FlatOptions, error) {
	return nil, env.FlatOptions{}, errUnreachable
}
func (unreachable) MakeFlatVector(string, int, env.Options) (env.Vector, error) {
	return nil, errUnreachable
}

// TestMultiAgentRemoteUnreachable: a multiagent run on a remote id whose
// server cannot be reached is refused saying so, not as if the env were
// single-agent; the header's Maker (Overrides.Envs) is the one asked.
func TestMultiAgentRemoteUnreachable(t *testing.T) {
	file := "algo: fake\nenv: grpc://127.0.0.1:1/mpe/simple_tag_v3\nsteps: 1000\n" +
		"multiagent:\n  policies: [adv, good]\n  policy_mapping: {\"adversary_*\": adv, agent_0: good}\nfake: {num_envs: 8}\n"
	_, err := Resolve([]byte(file), fakeSpecs(), Overrides{Envs: env.Maker{Remote: unreachable{}}})
	if err == nil || !strings.Contains(err.Error(), "cannot ask the server of grpc://127.0.0.1:1/mpe/simple_tag_v3") || !errors.Is(err, errUnreachable) {
		t.Fatalf("unreachable server: %v", err)
	}
	// Without a remote Opener the id is no multi-agent env.
	_, err = Resolve([]byte(file), fakeSpecs(), Overrides{})
	if err == nil || !strings.Contains(err.Error(), "needs a multi-agent env") {
		t.Fatalf("no remote opener: %v", err)
	}
}
