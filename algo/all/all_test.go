package all

import (
	"errors"
	"strings"
	"testing"

	"herd/algo"
)

// TestSpecsFollowTheContract checks what the CLI relies on for every listed
// algorithm: a unique lower-case name, the required functions, unique scalar
// names, and defaults that validate.
func TestSpecsFollowTheContract(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Specs() {
		if s.Name == "" || strings.ToLower(s.Name) != s.Name || seen[s.Name] {
			t.Errorf("bad or duplicate name %q", s.Name)
		}
		seen[s.Name] = true
		if s.NewConfig == nil || s.Train == nil && !s.Can.Has(algo.CanPlan) || s.LoadPolicy == nil {
			t.Errorf("%s: NewConfig, Train (unless a dataflow plan) and LoadPolicy are required", s.Name)
			continue
		}
		scal := map[string]bool{}
		for _, n := range s.Scalars {
			if scal[n] {
				t.Errorf("%s: scalar %q listed twice", s.Name, n)
			}
			scal[n] = true
		}
		// Defaults validate on a discrete or a continuous classic env
		// (algorithms may reject the other kind of action space).
		var errs []error
		for _, id := range []string{"CartPole-v1", "Pendulum-v1"} {
			h := algo.Header{Algo: s.Name, Env: id, Seed: 1, Steps: 1_000_000, LogEvery: 1000}
			errs = append(errs, s.NewConfig().Validate(h))
		}
		if errs[0] != nil && errs[1] != nil {
			t.Errorf("%s: defaults do not validate: %v", s.Name, errors.Join(errs...))
		}
		if got, ok := Lookup(s.Name); !ok || got.Name != s.Name {
			t.Errorf("Lookup(%q) failed", s.Name)
		}
	}
	for _, want := range []string{"ppo", "a2c"} {
		if !seen[want] {
			t.Errorf("%s is not listed", want)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}
