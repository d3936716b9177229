package env

import (
	"slices"
	"testing"
)

func TestAgentTeams(t *testing.T) {
	for _, c := range []struct {
		id    string
		names []string
		of    []int
	}{
		{"mpe/simple_tag_v3", []string{"adversary", "agent"}, []int{0, 0, 0, 1}},
		{"mpe/simple_tag_v3?num_good=2&num_adversaries=1", []string{"adversary", "agent"}, []int{0, 1, 1}},
		{"mpe/simple_spread_v3", []string{"agent"}, []int{0, 0, 0}},
	} {
		p, err := MakeParallel(c.id)
		if err != nil {
			t.Fatal(err)
		}
		names, of := AgentTeams(p)
		p.Close()
		if !slices.Equal(names, c.names) || !slices.Equal(of, c.of) {
			t.Errorf("%s: teams %v of %v, want %v of %v", c.id, names, of, c.names, c.of)
		}
	}
	for name, want := range map[string]string{"adversary_10": "adversary", "agent_0": "agent", "speaker": "speaker",
		"a_b": "a_b", "_1": "_1", "x_": "x_", "pursuer_3": "pursuer"} {
		if got := teamOfName(name); got != want {
			t.Errorf("team of %q: %q, want %q", name, got, want)
		}
	}
}
