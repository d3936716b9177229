package main

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestExample runs the example on a small budget: the two goroutines must
// learn (the last 20 episodes well above a random policy's ≈22) and print
// their summary.
func TestExample(t *testing.T) {
	var out bytes.Buffer
	last, err := run(context.Background(), &out, 1, 16384, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "versions published") || !(last > 40) {
		t.Fatalf("last 20 episodes %.1f, output:\n%s", last, out.String())
	}
}

// TestExampleStops: a run cancelled while both goroutines work returns
// the context's error and leaves no goroutine behind.
func TestExampleStops(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := run(ctx, &bytes.Buffer{}, 1, 1<<20, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	for range 100 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d goroutines after the run, %d before", runtime.NumGoroutine(), before)
}
