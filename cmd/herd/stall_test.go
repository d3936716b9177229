package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer that a worker writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// workerAsync runs `herd worker args…` in this process; its output goes to
// out, its error to the channel.
func workerAsync(ctx context.Context, out io.Writer, args ...string) <-chan error {
	done := make(chan error, 1)
	go func() {
		cmd := newWorkerCmdWith(testSpecs)
		cmd.SetOut(out)
		cmd.SetErr(out)
		cmd.SetArgs(args)
		done <- cmd.ExecuteContext(ctx)
	}()
	return done
}

// herd worker --stall bounds a learner's wait for samples: with no env
// worker up, learner 0 ends after its --stall with the watchdog's error,
// not at the 60 s default; a learner peer serves its metrics meanwhile and
// ends with the run.
func TestWorkerStall(t *testing.T) {
	srv, ctx := natsRun(t, 40*time.Second)
	ctl := launchAsync(t, ctx, "--config", writeLearnersConfig(t, 4), "--nats", srv.URL(), "--run", "stall", "--no-workers", "--ttl", "1s")
	var lead, peer syncBuffer
	start := time.Now()
	leadDone := workerAsync(ctx, &lead, "--role", "learner", "--nats", srv.URL(), "--run", "stall", "--ttl", "1s",
		"--out", filepath.Join(t.TempDir(), "run"), "--quiet", "--stall", "3s")
	peerDone := workerAsync(ctx, &peer, "--role", "learner", "--slot", "1", "--nats", srv.URL(), "--run", "stall", "--ttl", "1s",
		"--stall", "20s", "--metrics-addr", "127.0.0.1:0")
	// The peer serves its process's metrics while it waits.
	addr := regexp.MustCompile(`metrics for Prometheus at (http://\S+/metrics)`)
	var scraped bool
	for !scraped && time.Since(start) < 3*time.Second {
		if m := addr.FindStringSubmatch(peer.String()); m != nil {
			resp, err := http.Get(m[1])
			if err != nil {
				t.Fatalf("the peer's metrics: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
				t.Fatalf("the peer's metrics: %s\n%s", resp.Status, body)
			}
			scraped = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !scraped {
		t.Errorf("learner peer served no metrics; its output:\n%s", peer.String())
	}
	select {
	case err := <-leadDone:
		if err == nil || !strings.Contains(err.Error(), "got no sample for 3s") {
			t.Errorf("learner 0: %v, want the 3 s watchdog's error", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("learner 0 did not end within 15 s of a 3 s --stall")
	}
	<-peerDone
	<-ctl
}
