package hts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A Ctrl-C that stops every env worker is reported once; any other
// failure keeps every worker's error.
func TestJoinStopped(t *testing.T) {
	stop := fmt.Errorf("env worker: %w", context.Canceled)
	if err := joinStopped([]error{stop, nil, stop, stop}); err == nil || strings.Count(err.Error(), "canceled") != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("three stopped workers: %q, want one line wrapping context.Canceled", err)
	}
	boom := errors.New("env 3 crashed")
	if err := joinStopped([]error{stop, boom}); err == nil || !strings.Contains(err.Error(), "crashed") || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("a failure among stops: %q, want both", err)
	}
	if err := joinStopped([]error{nil, nil}); err != nil {
		t.Errorf("no errors: %v", err)
	}
}
