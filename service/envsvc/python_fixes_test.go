package envsvc

import (
	"context"
	"math"
	"runtime"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"herd/env"
	"herd/internal/pyproc"
	herdv1 "herd/proto/herd/v1"
)

// TestPythonStateMadeInReset: an env that makes `state` only in reset
// (Gymnasium's Pendulum, MountainCar) is described as having one, so the
// client's SetState works.
func TestPythonStateMadeInReset(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pyspaces:LateState")
	e, err := envs().Make("grpc://" + p.Addr() + "/LateState?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.Reset(1); err != nil {
		t.Fatal(err)
	}
	s, ok := e.(env.Stater)
	if !ok {
		t.Fatal("remote env is not a Stater")
	}
	obs, err := s.SetState([]float64{3, 4})
	if err != nil {
		t.Fatalf("SetState on an env whose state is made in reset: %v", err)
	}
	if obs[0] != 3 || obs[1] != 4 {
		t.Errorf("observation after SetState %v, want [3 4]", obs)
	}
}

// TestPythonNonFiniteDiscreteAction: NaN and ±Inf actions for Discrete and
// MultiDiscrete spaces are answered INVALID_ACTION, and the session goes
// on, as for any other invalid action.
func TestPythonNonFiniteDiscreteAction(t *testing.T) {
	for _, c := range []struct {
		envClass, id string
		good         []float32
	}{{"pycartpole:CartPole", "CartPole", []float32{1}}, {"pyspaces:MultiEcho", "MultiEcho", []float32{1, 2}}} {
		p := pyproc.Start(t, "herd_env.serve", "--env", c.envClass)
		s := rawSession(t, p.Addr())
		bad := func(v float32) []float32 { a := append([]float32(nil), c.good...); a[len(a)-1] = v; return a }
		msgs := []*herdv1.EnvRequest{openMsg(1, c.id, 1), {Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{}}},
			stepMsg(bad(float32(math.NaN()))), stepMsg(bad(float32(math.Inf(1)))), stepMsg(bad(float32(math.Inf(-1)))), stepMsg(c.good)}
		for _, m := range msgs {
			if err := s.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		for i := range msgs {
			a, err := s.Recv()
			if err != nil {
				t.Fatalf("%s: answer %d: %v (the session died)", c.id, i, err)
			}
			switch {
			case i >= 2 && i <= 4:
				if e := a.GetError(); e.GetReason() != "INVALID_ACTION" || codes.Code(e.GetCode()) != codes.InvalidArgument {
					t.Errorf("%s: non-finite action answered %v", c.id, a)
				}
			case i == 5:
				if len(a.GetBatch().GetRewards()) != 1 {
					t.Errorf("%s: step after non-finite actions answered %v", c.id, a)
				}
			}
		}
	}
}

// TestPythonSIGTERMWithStuckEnv: a server whose env hangs in step still
// exits on SIGTERM, within its grace period and a few seconds.
func TestPythonSIGTERMWithStuckEnv(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pyspaces:Stuck")
	s := rawSession(t, p.Addr())
	for _, m := range []*herdv1.EnvRequest{openMsg(1, "Stuck", 1), {Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{}}}, stepMsg([]float32{1})} {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // open and reset answered; the step hangs
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	exited := make(chan error, 1)
	go func() { _, err := p.Cmd.Process.Wait(); exited <- err }()
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Logf("exited %v after SIGTERM", time.Since(start))
	case <-time.After(15 * time.Second):
		_ = p.Cmd.Process.Kill()
		t.Fatal("the server ignored SIGTERM while its env was stuck in step")
	}
}

// TestPythonFastPaths runs python/tests/fastpath_check.py: the Python
// server's one-pass Discrete action check and its struct-packed writes
// into the shm segment match the plain per-action loop and array.array
// conversions, bit for bit and error message for error message.
func TestPythonFastPaths(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the shm segment needs Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := pyproc.Command(t, ctx, "tests/fastpath_check.py")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fastpath_check.py: %v\n%s", err, out)
	}
}
