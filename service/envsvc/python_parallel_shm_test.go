//go:build linux

package envsvc

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/internal/pyproc"
	"herd/internal/rng"
	"herd/internal/shmwire"
	herdv1 "herd/proto/herd/v1"
)

// TestPythonParallelShm: the Python server's --shm serves a multi-agent
// env (python/tests/pyparallel.py's LineWalk) as herd's Go server does,
// framed messages on the socket, so herd's client works unchanged: the
// shm id is multi-agent, a Parallel over shm steps as over gRPC and as
// the Go copy of the rules, and a vector of agent rows gives the same
// bits over shm as over gRPC. The server refuses bad actions in-band
// (INVALID_ACTION), answers an env's exception in-band (ENV_ERROR), ends
// a session that sends a segment's byte, and frees a session whose client
// went away.
func TestPythonParallelShm(t *testing.T) {
	name := shmName(t)
	before := devShm(t)
	p := pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:LineWalk", "--shm", name, "--max-sessions", "3")
	gid := "grpc://" + p.Addr() + "/LineWalk?timeout=20s"
	sid := "shm://" + name + "/LineWalk?timeout=20s"
	if !envs().IsParallel(sid) {
		t.Fatalf("IsParallel(%s) = false", sid)
	}
	sp, err := envs().MakeParallel(sid)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	gp, err := envs().MakeParallel(gid)
	if err != nil {
		t.Fatal(err)
	}
	defer gp.Close()
	lp := newLineWalk()
	for _, a := range lp.possible {
		ss, _ := sp.ObservationSpace(a)
		as, _ := sp.ActionSpace(a)
		if ss.String() != lp.obsSpace[a].String() || as.String() != lp.actSp[a].String() {
			t.Fatalf("agent %s spaces %v %v over shm", a, ss, as)
		}
	}
	r := rng.New(11, "test/pyparallel-shm", 0)
	left := 0
	for ep := range 12 {
		seed := int64(ep * 17)
		if ep%3 == 2 {
			seed = env.NoSeed
		}
		so, _, err := sp.Reset(seed)
		if err != nil {
			t.Fatal(err)
		}
		gob, _, err := gp.Reset(seed)
		if err != nil {
			t.Fatal(err)
		}
		lo, _, _ := lp.Reset(seed)
		sameObs(t, ep, -1, lo, so)
		sameObs(t, ep, -1, gob, so)
		for k := 0; len(lp.Agents()) > 0; k++ {
			acts := map[string][]float32{}
			for _, a := range lp.Agents() {
				acts[a] = []float32{float32(r.IntN(3))}
			}
			so, sr, sterm, strunc, _, err := sp.Step(acts)
			if err != nil {
				t.Fatal(err)
			}
			gob, gr, gterm, gtrunc, _, err := gp.Step(acts)
			if err != nil {
				t.Fatal(err)
			}
			lo, lr, lterm, ltrunc, _, _ := lp.Step(acts)
			sameObs(t, ep, k, lo, so)
			sameObs(t, ep, k, gob, so)
			for _, m := range []map[string]float64{lr, gr} {
				if !maps.Equal(m, sr) {
					t.Fatalf("episode %d step %d: rewards %v over shm, %v", ep, k, sr, m)
				}
			}
			if !maps.Equal(lterm, sterm) || !maps.Equal(ltrunc, strunc) || !slices.Equal(lp.Agents(), sp.Agents()) ||
				!maps.Equal(gterm, sterm) || !maps.Equal(gtrunc, strunc) || !slices.Equal(gp.Agents(), sp.Agents()) {
				t.Fatalf("episode %d step %d: go %v %v %v, grpc %v %v %v, shm %v %v %v", ep, k,
					lterm, ltrunc, lp.Agents(), gterm, gtrunc, gp.Agents(), sterm, strunc, sp.Agents())
			}
			if len(lp.Agents()) > 0 && len(lp.Agents()) < len(acts) {
				left++
			}
		}
	}
	if left == 0 {
		t.Fatal("no agent left before its episode's end: the test misses agents leaving")
	}
	sp.Close()
	gp.Close()

	const rows = 12
	vec := func(id string) env.Vector {
		v, err := envs().MakeVector(id+"&agent_id=true", rows, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	sv, gv := vec(sid), vec(gid)
	sb, err := sv.Reset(5)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := gv.Reset(5)
	if err != nil {
		t.Fatal(err)
	}
	compareBatch(t, "LineWalk grpc/shm", -1, gb, sb, false)
	act := make([]float32, rows)
	for step := range 60 {
		for i := range act {
			act[i] = float32(r.IntN(3))
		}
		if gb, err = gv.Step(act); err != nil {
			t.Fatal(err)
		}
		if sb, err = sv.Step(act); err != nil {
			t.Fatal(err)
		}
		compareBatch(t, "LineWalk grpc/shm", step, gb, sb, true)
	}
	sv.Close()
	gv.Close()

	// Raw framed sessions: what herd's client never sends.
	c := shmDial(t, name)
	ask := func(req *herdv1.EnvRequest) *herdv1.EnvResponse {
		t.Helper()
		if err := shmwire.WriteMsg(c, req); err != nil {
			t.Fatal(err)
		}
		return shmRead(t, c)
	}
	if o := ask(parallelOpen(2)); len(o.GetOpen().GetParallel().GetAgents()) != 3 {
		t.Fatalf("open answered %v", o)
	}
	checkParallelRefusals(t, ask)
	if _, err := c.Write([]byte{shmwire.Step}); err != nil {
		t.Fatal(err)
	}
	if e := shmRead(t, c).GetError(); e.GetCode() != int32(codes.InvalidArgument) || e.GetReason() != "" {
		t.Errorf("a segment's step byte: %v, want a session-ending INVALID_ARGUMENT", e)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the ending error: %v, want EOF", err)
	}
	c.Close()

	// A client that goes away mid-session frees its session: with
	// --max-sessions 3, five clients in turn that each open and vanish
	// leave room for more.
	for range 5 {
		c := shmDial(t, name)
		if err := shmwire.WriteMsg(c, parallelOpen(1)); err != nil {
			t.Fatal(err)
		}
		shmRead(t, c)
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := envs().MakeParallel(sid)
		if err == nil {
			v.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions not freed after their clients left: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for n := range devShm(t) {
		if !before[n] {
			t.Errorf("/dev/shm/%s appeared", n)
		}
	}
}

// TestPythonParallelShmFaults: an env's exception is answered in-band
// (ENV_ERROR) and the session goes on; a Python server killed mid-step
// gives Unavailable at once and a stopped one DeadlineExceeded after the
// id's timeout, never a hang.
func TestPythonParallelShmFaults(t *testing.T) {
	t.Run("env error", func(t *testing.T) {
		name := shmName(t)
		pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:LineWalk", "--kwargs", `{"fail_step": 2}`, "--shm", name)
		p, err := envs().MakeParallel("shm://" + name + "/LineWalk?timeout=20s")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		obs, _, err := p.Reset(3)
		if err != nil {
			t.Fatal(err)
		}
		acts := map[string][]float32{}
		for a := range obs {
			acts[a] = []float32{1}
		}
		if _, _, _, _, _, err := p.Step(acts); err != nil {
			t.Fatal(err)
		}
		_, _, _, _, _, err = p.Step(acts)
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "fails at step 2") {
			t.Fatalf("step 2 of an env that fails there: %v, want the env's error (Internal)", err)
		}
		if _, _, err := p.Reset(3); err != nil {
			t.Fatalf("reset after an env error: %v", err)
		}
	})

	t.Run("kill server mid-step", func(t *testing.T) {
		name := shmName(t)
		p := pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:LineWalk", "--kwargs", `{"sleep_s": 3}`, "--shm", name)
		v := resetVector(t, "shm://"+name+"/LineWalk?timeout=20s", 3, 1)
		time.AfterFunc(300*time.Millisecond, func() { p.Cmd.Process.Kill() })
		t0 := time.Now()
		_, err := v.Step([]float32{0, 1, 2})
		if status.Code(errors.Unwrap(err)) != codes.Unavailable || time.Since(t0) > 2*time.Second {
			t.Fatalf("after %v: err %v, want Unavailable at once", time.Since(t0), err)
		}
	})

	t.Run("stopped server", func(t *testing.T) {
		name := shmName(t)
		p := pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:LineWalk", "--shm", name)
		v := resetVector(t, "shm://"+name+"/LineWalk?timeout=1s", 3, 1)
		p.Cmd.Process.Signal(syscall.SIGSTOP)
		defer p.Cmd.Process.Signal(syscall.SIGCONT)
		waitStopped(t, p.Cmd.Process.Pid)
		t0 := time.Now()
		_, err := v.Step([]float32{0, 1, 2})
		if el := time.Since(t0); status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded || el > 3*time.Second {
			t.Fatalf("after %v: err %v, want DeadlineExceeded after the 1 s timeout", el, err)
		}
	})
}

func parallelOpen(n uint32) *herdv1.EnvRequest {
	o := openMsg(1, "LineWalk", n)
	o.GetOpen().Parallel = true
	return o
}

// shmDial connects to shm name's socket, with a deadline so that a
// server that does not answer fails the test instead of hanging it.
func shmDial(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: shmwire.SocketName(name), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// shmRead reads one framed EnvResponse.
func shmRead(t *testing.T, c *net.UnixConn) *herdv1.EnvResponse {
	t.Helper()
	var tag [1]byte
	if _, err := io.ReadFull(c, tag[:]); err != nil {
		t.Fatal(err)
	}
	if tag[0] != shmwire.Msg {
		t.Fatalf("answer byte %q, want a framed message", tag[0])
	}
	resp := new(herdv1.EnvResponse)
	if err := shmwire.ReadFrame(c, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// BenchmarkRemoteParallelStepPython: one Step of a FlatVector of LineWalk
// rows (3 agents per env, envs in one multi-agent session) served by
// python3 -m herd_env.serve, over gRPC on loopback and over shm:// (ns/op
// is per vector step). srv-cpu-us/op is the Python server's CPU time per
// step and cli-cpu-us/op this process's, both user + system: on a loaded
// machine they say more than the wall time.
func BenchmarkRemoteParallelStepPython(b *testing.B) {
	name := fmt.Sprintf("herdbench-ma-%d", os.Getpid())
	p := pyproc.Start(b, "herd_env.serve", "--env", "pyparallel:LineWalk", "--shm", name)
	pid := p.Cmd.Process.Pid
	for _, envs := range []int{1, 16} {
		for _, tr := range []struct{ name, prefix string }{{"grpc", "grpc://" + p.Addr()}, {"shm", "shm://" + name}} {
			b.Run(fmt.Sprintf("%s/envs=%d", tr.name, envs), func(b *testing.B) {
				rows := 3 * envs
				v := resetVector(b, tr.prefix+"/LineWalk", rows, 1)
				act := make([]float32, rows)
				b.ReportAllocs()
				srv0, cli0 := procCPU(b, pid), selfCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					act[i%rows] = float32(i % 3)
					if _, err := v.Step(act); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric((procCPU(b, pid)-srv0).Seconds()*1e6/float64(b.N), "srv-cpu-us/op")
				b.ReportMetric((selfCPU()-cli0).Seconds()*1e6/float64(b.N), "cli-cpu-us/op")
				b.ReportMetric(float64(envs)*float64(b.N)/b.Elapsed().Seconds(), "env-steps/s")
			})
		}
	}
}

// procCPU is process pid's user + system CPU time (/proc/PID/stat, in
// clock ticks of 10 ms: measure over seconds).
func procCPU(tb testing.TB, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from the state on
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// cpuPerOp starts counting the CPU time of process pid and of this one;
// the function it returns reports both per b.N operation, as server-µs/op
// and client-µs/op (pid's in 10 ms ticks: run enough operations).
func cpuPerOp(b *testing.B, pid int) (report func()) {
	server0, client0 := procCPU(b, pid), selfCPU()
	return func() {
		b.ReportMetric(float64((procCPU(b, pid)-server0).Microseconds())/float64(b.N), "server-µs/op")
		b.ReportMetric(float64((selfCPU()-client0).Microseconds())/float64(b.N), "client-µs/op")
	}
}

// selfCPU is this process's user + system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
