//go:build linux

package envsvc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
)

// startShm serves herd's envs over shm in this process until the test ends.
func startShm(tb testing.TB, name string) (stop func()) {
	tb.Helper()
	lis, err := ListenShm(name)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(Config{MaxEnvs: 64, MaxSessions: 8}).ServeShm(ctx, lis) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve shm: %v", err)
		}
	}
	tb.Cleanup(stop)
	return stop
}

// TestGoShm: herd's Go server over shared memory steps a vector exactly as
// a local SyncVector (and so as over gRPC), with K = 1 and 3 sessions in
// flight; a name in use is refused; stopping the server ends its sessions
// with Unavailable.
func TestGoShm(t *testing.T) {
	name := fmt.Sprintf("herdtest-go-%d", os.Getpid())
	stop := startShm(t, name)
	if _, err := ListenShm(name); err == nil {
		t.Fatal("a second listener on the same name succeeded")
	}
	for _, id := range []string{"CartPole-v1", "Pendulum-v1"} {
		local, err := envs().MakeVector(id, 5, env.Sync, env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(30))
		if err != nil {
			t.Fatal(err)
		}
		want := stepTrace(t, local, 3, 70)
		local.Close()
		for _, k := range []int{1, 3} {
			v, err := envs().MakeVector(fmt.Sprintf("shm://%s/%s?timeout=20s&inflight=%d", name, id, k), 5, env.Sync,
				env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(30))
			if err != nil {
				t.Fatal(err)
			}
			sameSlice(t, fmt.Sprintf("%s over shm, inflight=%d", id, k), want, stepTrace(t, v, 3, 70))
			v.Close()
		}
	}
	if _, err := envs().Make("shm://" + name + "/NoSuchEnv-v0"); !errors.Is(err, env.ErrUnknownID) {
		t.Fatalf("unknown env: %v", err)
	}
	pipes := ownPipes(t) // stdout and stderr on one pipe, say
	v := resetVector(t, "shm://"+name+"/CartPole-v1?timeout=20s", 2, 1)
	// The session runs on wake pipes, both with their two ends in this
	// process (the client's and the server's).
	if n := ownPipes(t) - pipes; n != 2 {
		t.Errorf("%d wake pipes while a session is open, want 2", n)
	}
	t0 := time.Now()
	stop() // closes the server's pipe ends, which ends the blocked session
	if _, err := v.Step([]float32{0, 1}); status.Code(errors.Unwrap(err)) != codes.Unavailable || time.Since(t0) > 5*time.Second {
		t.Fatalf("step after the server stopped: %v after %v", err, time.Since(t0))
	}
	v.Close()
	for deadline := time.Now().Add(10 * time.Second); ownPipes(t) != pipes; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d wake pipes left after the session ended", ownPipes(t)-pipes)
		}
	}
}

// BenchmarkRemoteVectorStepShm: one Step message for n CartPole envs
// through herd's Go server over shared memory (compare
// BenchmarkRemoteVectorStep, the same over gRPC).
func BenchmarkRemoteVectorStepShm(b *testing.B) {
	name := fmt.Sprintf("herdbench-go-%d", os.Getpid())
	startShm(b, name)
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("envs=%d", n), func(b *testing.B) {
			v := resetVector(b, "shm://"+name+"/CartPole-v1", n, 1)
			act := make([]float32, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				act[i%n] = float32(i & 1)
				if _, err := v.Step(act); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "env-steps/s")
		})
	}
}

// TestTrainShmSimpleSpread: a multi-agent env served over shm:// (framed
// messages on the socket) is one wherever a multi-agent id is taken, and
// IPPO trained on it ends with the local env's parameters, bit for bit; a
// single-agent id over shm stays single-agent.
func TestTrainShmSimpleSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("trains PPO for two updates twice")
	}
	name := fmt.Sprintf("herdtest-ma-%d", os.Getpid())
	startShm(t, name)
	const id = "mpe/simple_spread_v3?agent_id=true"
	remote := "shm://" + name + "/" + id + "&timeout=20s"
	if !envs().IsParallel(remote) || envs().IsParallel("shm://"+name+"/CartPole-v1?timeout=20s") {
		t.Fatalf("IsParallel: %s %v, CartPole-v1 %v; want true, false", remote, envs().IsParallel(remote), envs().IsParallel("shm://"+name+"/CartPole-v1"))
	}
	sameParams(t, "over shm", trainParams(t, "ippo-simple-spread.yaml", id, false),
		trainParams(t, "ippo-simple-spread.yaml", remote, false))
}

// shmPrefix serves herd's envs over shm until the benchmark ends and
// returns the id prefix shm://NAME/.
func shmPrefix(tb testing.TB) string {
	name := fmt.Sprintf("herdbench-%d", os.Getpid())
	startShm(tb, name)
	return "shm://" + name + "/"
}
