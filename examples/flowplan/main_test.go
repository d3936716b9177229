package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExample runs the custom plan on a small budget: the evaluation
// sub-flow must report (every 5 of 40 iterations: 8 evaluations) and the
// greedy policy must beat a random one (≈22).
func TestExample(t *testing.T) {
	var out bytes.Buffer
	last, err := run(context.Background(), &out, 1, 20480, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "8 evaluations") || !(last > 40) {
		t.Fatalf("last evaluation %.1f, output:\n%s", last, out.String())
	}
}
