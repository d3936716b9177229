package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExample runs the example on a small budget: it must train, print both
// lines, and the greedy policy must beat a random one (≈22) clearly.
func TestExample(t *testing.T) {
	var out bytes.Buffer
	mean, err := run(context.Background(), &out, 1, 12288)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "greedy evaluation over 10 episodes") || !(mean > 40) {
		t.Fatalf("mean %.1f, output:\n%s", mean, out.String())
	}
}
