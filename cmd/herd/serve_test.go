package main

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/pyproc"
	"herd/service/replaysvc"
)

// startServe runs `herd serve ARGS --addr 127.0.0.1:0` until the test ends
// and returns the address it printed.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs(append(append([]string{"serve"}, args...), "--addr", "127.0.0.1:0"))
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("serve %v: %v (%v)", args, err, <-done)
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		if err := <-done; exitCode(err) != exitInterrupted {
			t.Errorf("serve %v stopped: %v, want a clean interruption", args, err)
		}
	})
	// "herd: serving WHAT on ADDR (MODE)"
	f := strings.Fields(line[strings.Index(line, " on ")+4:])
	return f[0]
}

// TestTrainRemoteEnv: every algorithm trains, for a tiny budget, against
// `herd serve env` through a grpc:// env id.
func TestTrainRemoteEnv(t *testing.T) {
	addr := startServe(t, "env")
	for _, c := range []struct{ algo, env string }{
		{"ppo", "CartPole-v1"}, {"a2c", "CartPole-v1"}, {"dqn", "CartPole-v1"},
		{"ddpg", "Pendulum-v1"}, {"td3", "Pendulum-v1"}, {"sac", "Pendulum-v1"},
	} {
		out, err := runHerd(t, "train", "--algo", c.algo, "--env", "grpc://"+addr+"/"+c.env, "--steps", "1024",
			"--quiet", "--out", filepath.Join(t.TempDir(), c.algo))
		if err != nil || !strings.Contains(out, "done: ") {
			t.Errorf("%s on %s: %v\n%s", c.algo, c.env, err, out)
		}
	}
}

// TestTrainOnPythonEnv: PPO trains through the service on a pure-Python
// CartPole served by a real `python3 -m herd_env.serve` process (a smoke
// run: it finishes and records episodes).
func TestTrainOnPythonEnv(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole")
	out, err := runHerd(t, "train", "--algo", "ppo", "--env", "grpc://"+p.Addr()+"/CartPole", "--steps", "2048",
		"--quiet", "--set", "num_envs=4", "--set", "num_steps=128", "--out", filepath.Join(t.TempDir(), "run"))
	if err != nil || !strings.Contains(out, "done: 2048 steps") || strings.Contains(out, " 0 episodes") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestServeReplay: `herd serve replay` serves a store that the Go client
// pushes to and samples from with the samplers named on the command line;
// bad flags are errors.
func TestServeReplay(t *testing.T) {
	addr := startServe(t, "replay", "--dir", filepath.Join(t.TempDir(), "store"), "--mode", "hybrid",
		"--sampler", "per=prioritized:priority:0.6", "--sampler", "recent=prioritytime:time:0.99")
	c, err := replaysvc.Dial(addr, replaysvc.ClientOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Push(ctx, []replaysvc.Record{{Key: "a", Value: []byte("va"), Fields: map[string]float64{"priority": 1, "time": 1}}}); err != nil {
		t.Fatal(err)
	}
	for _, sampler := range []string{"", "per", "recent"} {
		got, err := c.Sample(ctx, 3, sampler)
		if err != nil || len(got) != 3 || string(got[2].Value) != "va" {
			t.Fatalf("sample %q: %v %v", sampler, got, err)
		}
	}
	for _, args := range [][]string{
		{"serve", "replay", "--mode", "hybrid"}, // no --dir
		{"serve", "replay", "--mode", "nope", "--dir", t.TempDir()},
		{"serve", "replay", "--dir", t.TempDir(), "--sampler", "x=prioritized:p"},
		{"serve", "replay", "--dir", t.TempDir(), "--durability", "maybe"},
		{"serve", "env", "--addr", "127.0.0.1:0", "--tls-cert", "missing.pem"},
	} {
		if out, err := runHerd(t, args...); err == nil {
			t.Errorf("%v: no error\n%s", args, out)
		}
	}
}
