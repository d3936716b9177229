package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childProc is what /proc shows of one child process of this test.
type childProc struct {
	argv   string // NUL-separated
	natsPW string // the password in its $HERD_NATS_URL
}

// natsChildren returns this process's children as /proc shows them now.
func natsChildren(t *testing.T) map[int]childProc {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self, out := os.Getpid(), map[int]childProc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(self) {
			continue
		}
		argv, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		c := childProc{argv: string(argv)}
		for _, kv := range strings.Split(string(environ), "\x00") {
			if v, ok := strings.CutPrefix(kv, "HERD_NATS_URL="); ok {
				if u, err := url.Parse(v); err == nil && u.User != nil {
					c.natsPW, _ = u.User.Password()
				}
			}
		}
		out[pid] = c
	}
	return out
}

// herd launch's embedded NATS server has a password; it reaches the
// workers through their environment, and no worker's argv, no file the
// run writes and nothing printed holds it.
func TestLaunchSecretNowhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, prof := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "prof")
	done := launchAsync(t, ctx, "--config", writeDistConfig(t, 10), "--out", out, "--quiet", "--cpuprofile", prof)
	seen := map[int]childProc{}
	tick := time.NewTicker(20 * time.Millisecond) // /proc has no change notification
	defer tick.Stop()
	var res launchResult
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-tick.C:
			for pid, c := range natsChildren(t) {
				if _, ok := seen[pid]; !ok {
					seen[pid] = c
				}
			}
		}
	}
	if res.err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", res.err, res.stdout, res.stderr)
	}
	var pw string
	for _, c := range seen {
		if c.natsPW != "" {
			pw = c.natsPW
		}
	}
	if len(pw) < 32 {
		t.Fatalf("no worker of %d children seen got a NATS password (%q) in its environment", len(seen), pw)
	}
	for pid, c := range seen {
		if c.natsPW != "" && c.natsPW != pw {
			t.Errorf("pid %d has another password", pid)
		}
		if strings.Contains(c.argv, pw) {
			t.Errorf("pid %d argv holds the password: %q", pid, c.argv)
		}
	}
	for name, s := range map[string]string{"stdout": res.stdout, "stderr": res.stderr} {
		if strings.Contains(s, pw) {
			t.Errorf("%s holds the password", name)
		}
	}
	files := 0
	for _, dir := range []string{out, prof} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			if bytes.Contains(b, []byte(pw)) {
				t.Errorf("%s holds the password", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 4 {
		t.Errorf("only %d files written", files)
	}
}
