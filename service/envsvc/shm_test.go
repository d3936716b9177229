//go:build linux

package envsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/internal/pyproc"
)

// shmName is a socket name no other test process uses.
func shmName(t *testing.T) string {
	return fmt.Sprintf("herdtest-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// devShm lists /dev/shm, to check that nothing is left there.
func devShm(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	m := map[string]bool{}
	for _, e := range ents {
		m[e.Name()] = true
	}
	return m
}

// segments counts the herd segments process pid maps.
func segments(t *testing.T, pid int) int {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), "memfd:herd-env")
}

// pipeEnds counts the pipe ends process pid holds: a shm session's wake
// pipes (shmwire.FlagPipes) are two in the server and two in the client.
func pipeEnds(t *testing.T, pid int) int {
	t.Helper()
	k := 0
	for _, n := range pipeInodes(t, pid) {
		k += n
	}
	return k
}

// pipeInodes maps each pipe process pid holds an end of to how many ends.
func pipeInodes(t *testing.T, pid int) map[string]int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, e := range ents {
		if to, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(to, "pipe:") {
			m[to]++
		}
	}
	return m
}

// ownPipes counts the pipes with two ends in this process: a shm session's
// two wake pipes when client and server are both here, besides, say, stdout
// and stderr on one pipe (a child process's stdout has one end here).
func ownPipes(t *testing.T) int {
	t.Helper()
	k := 0
	for _, n := range pipeInodes(t, os.Getpid()) {
		if n >= 2 {
			k++
		}
	}
	return k
}

// waitPipeEnds waits up to 10 s for process pid to hold want pipe ends.
func waitPipeEnds(t *testing.T, pid, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pipeEnds(t, pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("process %d holds %d pipe ends, want %d", pid, pipeEnds(t, pid), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameCartPoleTraces checks that each of ids steps a vector of 5 CartPole
// envs (30-step episodes, seed 4, 80 steps) to the bits base gives.
func sameCartPoleTraces(t *testing.T, base string, ids ...string) {
	t.Helper()
	trace := func(id string) []uint64 {
		v, err := envs().MakeVector(id, 5, env.Sync, env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(30))
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		return stepTrace(t, v, 4, 80)
	}
	want := trace(base)
	for _, id := range ids {
		sameSlice(t, id, want, trace(id))
	}
}

// TestShmMatchesGRPC: the Python server's CartPole stepped through shared
// memory gives the same bits as through gRPC, with K = 1 and 2 sessions in
// flight; a single env's reset, step and state requests work over shm.
func TestShmMatchesGRPC(t *testing.T) {
	name := shmName(t)
	p := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole", "--shm", name)
	sameCartPoleTraces(t, "grpc://"+p.Addr()+"/CartPole?timeout=20s",
		"shm://"+name+"/CartPole?timeout=20s", "shm://"+name+"/CartPole?timeout=20s&inflight=2",
		"shm://"+name+"/CartPole?timeout=20s&spin=0",
		"grpc://"+p.Addr()+"/CartPole?timeout=20s&inflight=3")

	e, err := envs().Make("shm://"+name+"/CartPole?timeout=20s", env.WithoutTimeLimit())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.Reset(1); err != nil {
		t.Fatal(err)
	}
	st := env.Unwrapped(e).(env.Stater)
	obs, err := st.SetState([]float64{0.5, 0, 0, 0})
	if err != nil || obs[0] != 0.5 {
		t.Fatalf("SetState over shm: %v %v", obs, err)
	}
	o, r, _, _, _, err := e.Step([]float32{1})
	if err != nil || r != 1 || o[0] != 0.5 {
		t.Fatalf("step after SetState: obs %v reward %v err %v", o, r, err)
	}
	if _, _, _, _, _, err := e.Step([]float32{3}); !errors.Is(err, env.ErrInvalidAction) {
		t.Fatalf("invalid action over shm: %v", err)
	}
	// The server's in-band errors come back over shm too: a step after
	// the episode ended needs a reset, and the session goes on.
	for ended := false; !ended; {
		_, _, term, trunc, _, err := e.Step([]float32{1})
		if err != nil {
			t.Fatal(err)
		}
		ended = term || trunc
	}
	if _, _, _, _, _, err := e.Step([]float32{1}); !errors.Is(err, env.ErrNeedsReset) {
		t.Fatalf("step after the end over shm: %v, want ErrNeedsReset", err)
	}
	if _, _, err := e.Reset(2); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := e.Step([]float32{0}); err != nil {
		t.Fatalf("step after reset: %v", err)
	}
	if _, err := envs().Make("shm://" + name + "/Other?timeout=20s"); !errors.Is(err, env.ErrUnknownID) {
		t.Fatalf("unknown env over shm: %v", err)
	}
	if _, err := envs().Make("shm://no-such-server-" + name + "/CartPole"); err == nil || !strings.Contains(err.Error(), "no herd env server") {
		t.Fatalf("no server: %v", err)
	}
	// Garbage on the socket ends that session with an error message, and
	// the server goes on serving.
	for _, junk := range []string{"X", "P\x03\x00\x00\x00\xff\xff\xff", "S"} {
		c, err := net.Dial("unix", "@herd-env-"+name)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte(junk))
		reply, _ := io.ReadAll(c)
		c.Close()
		if len(reply) < 5 || reply[0] != 'P' {
			t.Fatalf("after %q the server answered %q, want an error message", junk, reply)
		}
	}
	if _, err := envs().Make("shm://" + name + "/CartPole?timeout=20s"); err != nil {
		t.Fatalf("after garbage: %v", err)
	}
}

// TestShmFaults: a server killed (SIGKILL) in the middle of a step, a
// stopped server (SIGSTOP) and a client killed (SIGKILL) each end with a
// clear error within the call's deadline or a clean server, never a hang,
// and leave no shared-memory segment: nothing new in /dev/shm, and the
// server maps no segment once its client is gone.
func TestShmFaults(t *testing.T) {
	before := devShm(t)
	defer func() {
		for n := range devShm(t) {
			if !before[n] {
				t.Errorf("/dev/shm/%s was left behind", n)
			}
		}
	}()
	slow := `{"mean_ms": 3000, "cv": 0.01}` // one step takes ~3 s

	t.Run("kill server mid-step", func(t *testing.T) {
		name := shmName(t)
		p := pyproc.Start(t, "herd_env.serve", "--env", "herd_env.testenvs:Jittery", "--kwargs", slow, "--id", "J", "--shm", name)
		v := resetVector(t, "shm://"+name+"/J?timeout=20s", 2, 1)
		time.AfterFunc(300*time.Millisecond, func() { p.Cmd.Process.Kill() })
		t0 := time.Now()
		_, err := v.Step([]float32{0, 1})
		if status.Code(errors.Unwrap(err)) != codes.Unavailable || time.Since(t0) > 2*time.Second {
			t.Fatalf("after %v: err %v, want Unavailable at once", time.Since(t0), err)
		}
		t.Logf("killed server: %v after %v", err, time.Since(t0).Round(time.Millisecond))
	})

	t.Run("stopped server", func(t *testing.T) {
		name := shmName(t)
		p := pyproc.Start(t, "herd_env.serve", "--env", "herd_env.testenvs:Trivial", "--shm", name)
		v := resetVector(t, "shm://"+name+"/Trivial?timeout=1s", 2, 1)
		p.Cmd.Process.Signal(syscall.SIGSTOP)
		defer p.Cmd.Process.Signal(syscall.SIGCONT)
		waitStopped(t, p.Cmd.Process.Pid) // the signal is delivered asynchronously
		t0 := time.Now()
		_, err := v.Step([]float32{0, 1})
		el := time.Since(t0)
		if status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded || el > 3*time.Second {
			t.Fatalf("after %v: err %v, want DeadlineExceeded after the 1 s timeout", el, err)
		}
		if _, err2 := v.Step([]float32{0, 1}); err2 == nil {
			t.Fatal("step after a timeout succeeded; the session must be broken")
		}
		p.Cmd.Process.Signal(syscall.SIGCONT)
		v.Close()
		waitSegments(t, p.Cmd.Process.Pid, 0)
		t.Logf("stopped server: %v after %v", err, el.Round(time.Millisecond))
	})

	t.Run("kill client", func(t *testing.T) {
		name := shmName(t)
		p := pyproc.Start(t, "herd_env.serve", "--env", "herd_env.testenvs:Trivial", "--shm", name)
		pipes := pipeEnds(t, p.Cmd.Process.Pid) // its stdout and stderr, say
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestShmHelperClient$")
		cmd.Env = append(os.Environ(), "HERD_SHM_HELPER="+name)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		k, _ := out.Read(buf)
		if !strings.Contains(string(buf[:k]), "stepping") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper client said %q", buf[:k])
		}
		if n := segments(t, p.Cmd.Process.Pid); n != 1 {
			t.Errorf("server maps %d segments while the client steps, want 1", n)
		}
		if n := pipeEnds(t, p.Cmd.Process.Pid) - pipes; n != 2 {
			t.Errorf("server holds %d wake pipe ends while the client steps, want 2", n)
		}
		cmd.Process.Kill()
		cmd.Wait()
		waitSegments(t, p.Cmd.Process.Pid, 0)
		waitPipeEnds(t, p.Cmd.Process.Pid, pipes)
		// The server goes on serving.
		v := resetVector(t, "shm://"+name+"/Trivial?timeout=20s", 3, 1)
		if _, err := v.Step([]float32{0, 1, 1}); err != nil {
			t.Fatal(err)
		}
	})
}

// waitStopped waits up to 10 s for process pid to be stopped (state T).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name in parentheses.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop: %s", pid, stat)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitSegments waits up to 10 s for process pid to map want segments.
func waitSegments(t *testing.T, pid, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for segments(t, pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("server still maps %d segments, want %d", segments(t, pid), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShmHelperClient is the client TestShmFaults kills: it steps a vector
// over shm until it is killed. It does nothing in a normal test run.
func TestShmHelperClient(t *testing.T) {
	name := os.Getenv("HERD_SHM_HELPER")
	if name == "" {
		t.Skip("helper process for TestShmFaults")
	}
	v, err := envs().MakeVector("shm://"+name+"/Trivial?timeout=20s", 2, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Reset(1); err != nil {
		t.Fatal(err)
	}
	fmt.Println("stepping")
	for {
		if _, err := v.Step([]float32{0, 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkRemoteVectorStepPython: one Step message for n envs of
// herd_env.testenvs:Trivial (an env that does nothing, so ns/op is the
// transport's own cost) served by python3 -m herd_env.serve, over gRPC on
// loopback (grpc: grpcio's server, grpc-h2: herd_env's own on the h2
// library, --grpc-impl h2) and over shared memory; server-µs/op is the
// server process's CPU per message, client-µs/op this one's (herd's
// client); shm-spin3us and shm-spin5us are shared memory with both sides
// watching the segment 3 or 5 µs before they block (?spin=D,
// --shm-spin-us D; off by default, shmwire.SpinFor), for comparing them
// on a given machine.
func BenchmarkRemoteVectorStepPython(b *testing.B) {
	// Each server is started when its first case runs and kept for the
	// benchmark's reruns. The shm cases each have a server of their own
	// that serves no gRPC session: on the 2-core VM a 1-env shm message
	// to a process that had served one (grpcio or h2) took 20–25 µs
	// against 10–13, at the same server CPU per message.
	servers := map[string]*pyproc.Proc{}
	server := func(key string, args ...string) *pyproc.Proc {
		if p := servers[key]; p != nil {
			return p
		}
		// On the outer b: a case's own b ends (and its cleanups run)
		// after each of its runs.
		p := pyproc.Start(b, "herd_env.serve", append([]string{"--env", "herd_env.testenvs:Trivial"}, args...)...)
		servers[key] = p
		return p
	}
	grpcCase := func(impl string) func() (string, *pyproc.Proc) {
		return func() (string, *pyproc.Proc) {
			p := server(impl, "--grpc-impl", impl)
			return "grpc://" + p.Addr(), p
		}
	}
	shmCase := func(key string, args ...string) func() (string, *pyproc.Proc) {
		return func() (string, *pyproc.Proc) {
			name := fmt.Sprintf("herdbench-%s-%d", key, os.Getpid())
			return "shm://" + name, server(key, append([]string{"--shm", name}, args...)...)
		}
	}
	for _, tr := range []struct {
		name  string
		start func() (string, *pyproc.Proc)
		query string
	}{
		{"grpc", grpcCase("grpcio"), ""},
		{"grpc-h2", grpcCase("h2"), ""},
		{"shm", shmCase("shm"), ""},
		{"shm-spin3us", shmCase("shm-spin3us", "--shm-spin-us", "3"), "?spin=3us"},
		{"shm-spin5us", shmCase("shm-spin5us", "--shm-spin-us", "5"), "?spin=5us"},
	} {
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/envs=%d", tr.name, n), func(b *testing.B) {
				prefix, p := tr.start()
				v := resetVector(b, prefix+"/Trivial"+tr.query, n, 1)
				act := make([]float32, n)
				b.ReportAllocs()
				reportCPU := cpuPerOp(b, p.Cmd.Process.Pid)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					act[i%n] = float32(i & 1)
					if _, err := v.Step(act); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "env-steps/s")
				reportCPU() // use -benchtime 3000x or more (10 ms ticks)
			})
		}
	}
}

// TestPythonShmUnittests runs herd_env.shm's own tests (python/tests:
// the segment's layout and a uint8 session's writes into it; the wake
// pipes and the socket give the same bits, a gone client or a
// stopped server ends a pipe session; multi-agent framed sessions; the
// step paths, shm and gRPC, with and without NumPy, give the plain
// per-env loop's bits; herd_env.stepwire's step messages are
// protobuf's), so that they run wherever the Go tests do.
func TestPythonShmUnittests(t *testing.T) {
	py := pyproc.Python(t)
	dir := filepath.Join(pyproc.Root(), "python")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "test_shm_pipes", "test_shm_parallel", "test_shm_u8", "test_step_paths", "test_stepwire")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir+string(os.PathListSeparator)+filepath.Join(dir, "tests"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
}

// TestShmSpaces: Box and MultiDiscrete actions and nested observations
// (python/tests/pyspaces.py) travel through shared memory as through gRPC.
func TestShmSpaces(t *testing.T) {
	for _, cls := range []string{"BoxEcho", "MultiEcho"} {
		t.Run(cls, func(t *testing.T) {
			name := shmName(t)
			p := pyproc.Start(t, "herd_env.serve", "--env", "pyspaces:"+cls, "--shm", name)
			trace := func(id string) []uint64 {
				v, err := envs().MakeVector(id, 3, env.Sync, env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(5))
				if err != nil {
					t.Fatal(err)
				}
				defer v.Close()
				return stepTrace(t, v, 8, 12)
			}
			sameSlice(t, cls, trace("grpc://"+p.Addr()+"/"+cls+"?timeout=20s"), trace("shm://"+name+"/"+cls+"?timeout=20s&inflight=2"))
		})
	}
}

// TestPythonProcs: with --procs 2 the two sessions of a vector's
// inflight=2 step in two worker processes (the Pid env observes its
// process id), neither of them the server's own, over shm and over gRPC
// with --grpc-impl h2; kill -9 of a worker fails its client's next step
// at once (not at the timeout) and new sessions go to the live worker;
// kill -9 of the server ends the worker it leaves.
func TestPythonProcs(t *testing.T) {
	h2Python(t)
	name := shmName(t)
	p := pyproc.Start(t, "herd_env.serve", "--env", "herd_env.testenvs:Pid", "--shm", name, "--procs", "2", "--grpc-impl", "h2")
	pids := func(id string, n int) (env.Vector, []int) {
		t.Helper()
		v, err := envs().MakeVector(id, n, env.Sync)
		if err != nil {
			t.Fatal(err)
		}
		b, err := v.Reset(1)
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for i := 0; i < n; i++ {
			out = append(out, int(b.Obs[i*b.ObsDim]))
		}
		return v, out
	}
	// The same bits from sessions in 2 workers as from one process.
	cp := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole", "--shm", name+"-cp", "--procs", "2", "--grpc-impl", "h2")
	sameCartPoleTraces(t, "grpc://"+cp.Addr()+"/CartPole?timeout=20s",
		"shm://"+name+"-cp/CartPole?timeout=20s&inflight=2", "shm://"+name+"-cp/CartPole?timeout=20s&inflight=3",
		"grpc://"+cp.Addr()+"/CartPole?timeout=20s&inflight=2")

	var a, b int
	for i, prefix := range []string{"shm://" + name, "grpc://" + p.Addr()} {
		v, got := pids(prefix+"/Pid?timeout=20s&inflight=2", 4)
		defer v.Close()
		if got[1] != got[0] || got[3] != got[2] || got[0] == got[2] || got[0] == p.Cmd.Process.Pid || got[2] == p.Cmd.Process.Pid {
			t.Fatalf("%s: env rows stepped by processes %v (server %d), want 2 workers, 2 rows each", prefix, got, p.Cmd.Process.Pid)
		}
		if i == 0 {
			a, b = got[0], got[2]
		} else if (got[0] != a || got[2] != b) && (got[0] != b || got[2] != a) {
			t.Fatalf("gRPC sessions in processes %d and %d, shm's in %d and %d: want the same 2 workers", got[0], got[2], a, b)
		}
		if _, err := v.Step(make([]float32, 4)); err != nil {
			t.Fatal(err)
		}
	}

	shmV, _ := pids("shm://"+name+"/Pid?timeout=20s&inflight=2", 2)
	defer shmV.Close()
	if err := syscall.Kill(a, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := shmV.Step(make([]float32, 2)); err == nil {
		t.Fatal("a step with a killed worker succeeded")
	} else if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a step with a killed worker failed after %v (%v), want at once", took, err)
	}
	for _, prefix := range []string{"shm://" + name, "grpc://" + p.Addr()} {
		for deadline := time.Now().Add(10 * time.Second); ; {
			// the server learns of the death from its socket pair: until
			// then a new session may still be handed to the dead worker
			w, err := envs().MakeVector(prefix+"/Pid?timeout=20s", 1, env.Sync)
			if err == nil {
				got, _ := w.Reset(1)
				w.Close()
				if got != nil && int(got.Obs[0]) == b {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no new session on the live worker %d within 10 s (last: %v)", prefix, b, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(b, 0) == nil; {
		if state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b)); strings.Contains(string(state), ") Z ") {
			break // exited; a zombie until its parent's parent reaps it
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %d still runs 10 s after the server was killed", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
