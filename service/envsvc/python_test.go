package envsvc

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/internal/pyproc"
	"herd/internal/rng"
	herdv1 "herd/proto/herd/v1"
)

// TestPythonCartPoleMatchesGo steps a pure-Python CartPole (Gymnasium's
// equations in float64, python/tests/pycartpole.py) served by a real
// `python3 -m herd_env.serve` process, and herd's Go CartPole, from the same
// float64 states with the same actions. Observations are float32 on the
// wire, so the comparison is on what both sides keep in float64, read
// through the protocol's State request (env.Stater on the client): after
// every step the states agree to 1e-12, rewards and termination exactly,
// and each observation is exactly its own state rounded to float32.
func TestPythonCartPoleMatchesGo(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole")
	compareCartPole(t, "grpc://"+p.Addr()+"/CartPole?timeout=20s")
}

// TestGymnasiumCartPoleMatchesGo is TestPythonCartPoleMatchesGo with
// Gymnasium's own CartPole-v1 (gymnasium.make, its wrappers included) in
// the server, from the source tree GYMNASIUM_SRC names (the directory
// holding gymnasium/; needs numpy, cloudpickle and typing_extensions). herd
// does not depend on Gymnasium, so without GYMNASIUM_SRC it is skipped.
// Over gRPC and, on Linux, over shared memory.
func TestGymnasiumCartPoleMatchesGo(t *testing.T) {
	src := os.Getenv("GYMNASIUM_SRC")
	if src == "" {
		t.Skip("skipping: GYMNASIUM_SRC (a directory holding Gymnasium's gymnasium/ package) is not set")
	}
	if _, err := os.Stat(filepath.Join(src, "gymnasium", "__init__.py")); err != nil {
		t.Fatalf("GYMNASIUM_SRC=%s: %v", src, err)
	}
	args := []string{"--env", "gymnasium:make", "--kwargs", `{"id": "CartPole-v1"}`}
	shm := ""
	if runtime.GOOS == "linux" { // the shared-memory transport is Linux's
		shm = fmt.Sprintf("herdtest-%d-gymnasium", os.Getpid())
		args = append(args, "--shm", shm)
	}
	p := pyproc.StartWithPath(t, src, "herd_env.serve", args...)
	t.Run("grpc", func(t *testing.T) { compareCartPole(t, "grpc://"+p.Addr()+"/CartPole-v1?timeout=20s") })
	if shm != "" {
		t.Run("shm", func(t *testing.T) { compareCartPole(t, "shm://"+shm+"/CartPole-v1?timeout=20s") })
	}
}

// compareCartPole steps the CartPole served at id and herd's Go CartPole
// from the same float64 states. Each episode resets both (which also
// restarts a server-side time limit such as Gymnasium's TimeLimit, which
// setting the state does not) and then sets the state.
func compareCartPole(t *testing.T, id string) {
	t.Helper()
	remote, err := envs().Make(id, env.WithoutTimeLimit())
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	local, err := envs().Make("CartPole-v1", env.WithoutTimeLimit())
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if _, _, err := remote.Reset(1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := local.Reset(1); err != nil {
		t.Fatal(err)
	}
	rs, ls := env.Unwrapped(remote).(env.Stater), env.Unwrapped(local).(env.Stater)
	r := rng.New(5, "test/pycartpole", 0)
	steps, terms := 0, 0
	var maxDiff float64
	for ep := 0; ep < 40; ep++ {
		if _, _, err := remote.Reset(int64(ep) + 2); err != nil {
			t.Fatal(err)
		}
		if _, _, err := local.Reset(int64(ep) + 2); err != nil {
			t.Fatal(err)
		}
		s0 := []float64{r.Float64()*4 - 2, r.Float64()*4 - 2, r.Float64()*0.4 - 0.2, r.Float64()*4 - 2}
		if _, err := rs.SetState(s0); err != nil {
			t.Fatal(err)
		}
		if _, err := ls.SetState(s0); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 60; k++ {
			a := []float32{float32(r.IntN(2))}
			ro, rr, rterm, rtrunc, _, err := remote.Step(a)
			if err != nil {
				t.Fatal(err)
			}
			lo, lr, lterm, ltrunc, _, err := local.Step(a)
			if err != nil {
				t.Fatal(err)
			}
			steps++
			rst, lst := rs.StateTo(nil), ls.StateTo(nil)
			if len(rst) != 4 {
				t.Fatalf("remote state %v", rst)
			}
			for i := range lst {
				d := math.Abs(rst[i] - lst[i])
				maxDiff = max(maxDiff, d)
				if d > 1e-12 {
					t.Fatalf("episode %d step %d: state[%d] python %v go %v", ep, k, i, rst[i], lst[i])
				}
				if ro[i] != float32(rst[i]) || lo[i] != float32(lst[i]) {
					t.Fatalf("episode %d step %d: obs[%d] python %v (state %v) go %v (state %v)", ep, k, i, ro[i], rst[i], lo[i], lst[i])
				}
			}
			if rr != lr || rterm != lterm || rtrunc != ltrunc {
				t.Fatalf("episode %d step %d: python (%v %v %v) go (%v %v %v)", ep, k, rr, rterm, rtrunc, lr, lterm, ltrunc)
			}
			if lterm {
				terms++
				break
			}
		}
	}
	if terms < 10 {
		t.Errorf("only %d of 40 episodes terminated; the comparison misses termination", terms)
	}
	t.Logf("%d steps compared, %d terminations, largest state difference %.3g", steps, terms, maxDiff)
}

// TestPythonVectorAndErrors: the Python server steps a vector with
// autoreset and episode statistics, answers an invalid action in-band with
// INVALID_ACTION (the session going on), ends a wrong-version session with
// FAILED_PRECONDITION while serving others, and a client whose Python
// server is killed mid-episode gets an error within its deadline.
func TestPythonVectorAndErrors(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole")
	v, err := envs().MakeVector("grpc://"+p.Addr()+"/CartPole?timeout=5s", 8, env.Sync, env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(50))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Reset(3); err != nil {
		t.Fatal(err)
	}
	r := rng.New(6, "test/pyvector", 0)
	act := make([]float32, 8)
	episodes, truncs := 0, 0
	for step := 0; step < 120; step++ {
		for i := range act {
			act[i] = float32(r.IntN(2))
		}
		b, err := v.Step(act)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 8; i++ {
			if !b.Done(i) {
				continue
			}
			episodes++
			if b.Truncated[i] {
				truncs++
				if b.Infos[i].Episode.Length != 50 {
					t.Fatalf("truncated episode of length %d, limit 50", b.Infos[i].Episode.Length)
				}
			}
			if !b.Infos[i].HasEpisode || b.Infos[i].Episode.Return != float64(b.Infos[i].Episode.Length) {
				t.Fatalf("env %d: episode info %+v", i, b.Infos[i])
			}
			for _, x := range b.ObsRow(i) { // a fresh episode starts within ±0.05
				if math.Abs(float64(x)) > 0.05 {
					t.Fatalf("env %d: obs after autoreset %v", i, b.ObsRow(i))
				}
			}
		}
	}
	if episodes < 8 {
		t.Fatalf("%d episodes ended", episodes)
	}

	s := rawSession(t, p.Addr())
	for _, m := range []*herdv1.EnvRequest{openMsg(1, "CartPole", 2), {Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{}}},
		stepMsg([]float32{0, 5}), stepMsg([]float32{1, 0})} {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	var answers []*herdv1.EnvResponse
	for range 4 {
		a, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, a)
	}
	if e := answers[2].GetError(); e.GetReason() != "INVALID_ACTION" || codes.Code(e.GetCode()) != codes.InvalidArgument {
		t.Fatalf("invalid action answered %v", answers[2])
	}
	if len(answers[3].GetBatch().GetRewards()) != 2 {
		t.Fatalf("step after an invalid action answered %v", answers[3])
	}
	bad := rawSession(t, p.Addr())
	if err := bad.Send(openMsg(7, "CartPole", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("wrong version: %v", err)
	}
	if _, err := envs().Make("grpc://" + p.Addr() + "/Other"); !errors.Is(err, env.ErrUnknownID) {
		t.Fatalf("wrong id: %v", err)
	}
	if _, err := v.Step(act); err != nil {
		t.Fatalf("the vector session fails after others misbehaved: %v", err)
	}

	// Kill the server mid-episode.
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := v.Step(act); err == nil {
		t.Fatal("step on a killed server succeeded")
	} else if d := time.Since(start); d > 6*time.Second {
		t.Fatalf("error after %v, beyond the 5 s deadline: %v", d, err)
	} else {
		t.Logf("after SIGKILL: %v (in %v)", err, d)
	}
}

// TestPythonSpaces: the Python server describes Box (with a shape and
// scalar bounds) and MultiDiscrete spaces fully and hands actions to the
// env in their order (python/tests/pyspaces.py).
func TestPythonSpaces(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pyspaces:BoxEcho")
	e, err := envs().Make("grpc://" + p.Addr() + "/BoxEcho?timeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	obs, ok := e.ObservationSpace().(env.Box)
	if !ok || fmt.Sprint(obs.Shape()) != "[2 2]" || obs.Low[3] != -10 || obs.High[0] != 10 {
		t.Fatalf("observation space %v", e.ObservationSpace())
	}
	if act, ok := e.ActionSpace().(env.Box); !ok || act.Dim() != 3 || act.High[2] != 2 {
		t.Fatalf("action space %v", e.ActionSpace())
	}
	if _, _, err := e.Reset(0); err != nil {
		t.Fatal(err)
	}
	o, r, term, _, _, err := e.Step([]float32{0.5, -1, 0.25})
	if err != nil || r != -0.25 || term || fmt.Sprint(o) != "[0.5 -1 0.25 -0.25]" {
		t.Fatalf("step: %v %v %v %v", o, r, term, err)
	}
	if _, _, _, _, _, err := e.Step([]float32{float32(math.NaN()), 0, 0}); !errors.Is(err, env.ErrInvalidAction) {
		t.Fatalf("NaN action: %v", err)
	}

	p2 := pyproc.Start(t, "herd_env.serve", "--env", "pyspaces:MultiEcho")
	v, err := envs().MakeVector("grpc://"+p2.Addr()+"/MultiEcho?timeout=10s", 2, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if md, ok := v.ActionSpace().(env.MultiDiscrete); !ok || fmt.Sprint(md.Nvec) != "[3 4]" {
		t.Fatalf("action space %v", v.ActionSpace())
	}
	if o, ok := v.ObservationSpace().(env.Box); !ok || o.Dim() != 2 || o.High[1] != 10 {
		t.Fatalf("observation space %v", v.ObservationSpace())
	}
	if _, err := v.Reset(1); err != nil {
		t.Fatal(err)
	}
	b, err := v.Step([]float32{2, 3, 1, 0})
	if err != nil || b.Rewards[0] != 23 || b.Rewards[1] != 10 || fmt.Sprint(b.Obs) != "[2 3 1 0]" {
		t.Fatalf("step: %+v %v", b, err)
	}
	if _, err := v.Step([]float32{3, 0, 0, 0}); !errors.Is(err, env.ErrInvalidAction) {
		t.Fatalf("out-of-range MultiDiscrete: %v", err)
	}
}

// TestPythonMaxSessions: past --max-sessions live sessions the Python
// server refuses a new one at once (RESOURCE_EXHAUSTED) instead of leaving
// it waiting, and accepts it again once a session ends. The servicer, not
// the transport's call limit, refuses it: a client's Describe, which the
// transport may still count after the client has its answer, never takes
// a session's place.
func TestPythonMaxSessions(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole", "--max-sessions", "2")
	id := "grpc://" + p.Addr() + "/CartPole?timeout=10s"
	a, err := envs().Make(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := envs().Make(id)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	if _, err := envs().Make(id); status.Code(errors.Unwrap(err)) != codes.ResourceExhausted ||
		!strings.Contains(err.Error(), "2 sessions are open") || time.Since(start) > 5*time.Second {
		t.Fatalf("third session: %v after %v", err, time.Since(start))
	}
	a.Close()
	var c env.Env
	for try := 0; try < 50; try++ { // the server notices the end of a's stream asynchronously
		if c, err = envs().Make(id); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after a session ended: %v", err)
	}
	c.Close()
}
