package tune

import (
	"context"
	"strings"
	"testing"
	"time"
)

// withRuntime sets the pal executor and the counts, keeps the runtime
// section's other keys and the rest of the file.
func TestWithRuntime(t *testing.T) {
	in := "# tiny\nalgo: dqn\nruntime: {executor: local, learner_mode: sync}\ndqn: {batch_size: 32}\n"
	out, err := withRuntime([]byte(in), 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"executor: pal", "actors: 3", "learners: 2", "learner_mode: sync", "batch_size: 32", "# tiny"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tuned config lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "local") {
		t.Errorf("the old executor stayed:\n%s", out)
	}
	if _, err := withRuntime([]byte("- a list\n"), 1, 1); err == nil {
		t.Error("a YAML list was accepted as a config")
	}
}

// Explore refuses bad settings before it measures anything.
func TestExploreRefusesBadOptions(t *testing.T) {
	for _, o := range []ExploreOptions{
		{Cores: 4, Budget: time.Second},
		{Config: "x.yaml", Cores: 1, Budget: time.Second},
		{Config: "x.yaml", Cores: 4, Budget: time.Millisecond},
		{Config: "x.yaml", Cores: 1000, Budget: time.Second},
	} {
		if err := Explore(context.Background(), nil, o); err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%+v: err %v, want one naming the flag", o, err)
		}
	}
}
