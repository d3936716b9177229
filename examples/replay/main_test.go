package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestExample runs the example for a short while: actors must have filled
// the buffer, the learner must have sampled and updated priorities, and the
// rate limiter must hold the sampled/inserted ratio near 4 (its error buffer
// of 2000 items allows 2000 extra samples on 1000+ inserts at most).
func TestExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	st, err := run(ctx, &out, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "inserted ") {
		t.Fatalf("output: %q", out.String())
	}
	if st.Inserted < 1000 || st.Sampled == 0 || st.Updated == 0 || st.Held != int(min(st.Inserted, 100_000)) {
		t.Fatalf("stats %+v", st)
	}
	if lim := 4*float64(st.Inserted) + 2000 + 128; float64(st.Sampled) > lim {
		t.Fatalf("sampled %d > rate-limit bound %.0f", st.Sampled, lim)
	}
}
