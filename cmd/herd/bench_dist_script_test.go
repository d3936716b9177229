package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBenchDistScript runs scripts/bench-dist.sh at tiny size (N = 1, 2
// env-worker processes, 2000 steps, 1 busy loop) and checks it prints a
// rate for each of its four cells.
func TestBenchDistScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herd and launches processes")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/bench-dist.sh", "2", "2000")
	cmd.Env = append(cmd.Environ(), "LOAD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench-dist.sh: %v\n%s", err, out)
	}
	var rows int
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(l, "|")
		if len(f) == 5 && strings.TrimSpace(f[1]) != "busy loops" && !strings.HasPrefix(strings.TrimSpace(f[1]), "---") {
			if strings.TrimSpace(f[3]) == "" {
				t.Errorf("row without a rate: %q", l)
			}
			rows++
		}
	}
	if rows != 4 {
		t.Fatalf("got %d rows, want 4:\n%s", rows, out)
	}
}
