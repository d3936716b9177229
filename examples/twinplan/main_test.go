package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExample runs the twin trainer on a small budget: each policy learns
// on its own agents' episodes only (40 rounds × 2 workers × 8 envs: 1920
// adversary episodes, 640 good ones), and the synchronous plan gives the
// same output twice.
func TestExample(t *testing.T) {
	var outs [2]bytes.Buffer
	for i := range outs {
		if _, err := run(context.Background(), &outs[i], 3, 64000, 2); err != nil {
			t.Fatal(err)
		}
	}
	t.Log(outs[0].String())
	for _, want := range []string{"adversary: 1920 episodes", "good: 640 episodes", "64000 steps"} {
		if !strings.Contains(outs[0].String(), want) {
			t.Errorf("output lacks %q:\n%s", want, outs[0].String())
		}
	}
	if outs[0].String() != outs[1].String() {
		t.Errorf("two runs of one seed differ:\n%s\n%s", outs[0].String(), outs[1].String())
	}
}
