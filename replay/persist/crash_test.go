package persist

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/internal/rng"
)

const (
	crashEnvDir  = "HERD_PERSIST_CRASH_DIR"
	crashEnvSync = "HERD_PERSIST_CRASH_SYNC"
	crashValue   = 2000
)

func crashKey(i int) string { return fmt.Sprintf("k%07d", i) }

// TestCrashChild is the child half of TestCrash: run only when re-executed
// with crashEnvDir set. It pushes distinct keys in order forever, reporting
// on stdout what the docs promise survives: "ack N" (Sync: key N is
// durable), "flushed N" (WriteBack: keys < N were flushed) and "snap N" (a
// snapshot holding keys < N completed).
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("child process of TestCrash")
	}
	durability := WriteBack
	if os.Getenv(crashEnvSync) == "1" {
		durability = Sync
	}
	s, err := Open(ctx, Options{Mode: Hybrid, Dir: filepath.Join(dir, "store"), CacheMB: 1, Durability: durability,
		SnapshotURL: "file://" + filepath.ToSlash(filepath.Join(dir, "snaps")) + "?create_dir=1", SnapshotEvery: -1,
		Samplers: []Sampler{NewUniform("uniform"), NewPrioritized("per", "priority", 1)}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	out := os.Stdout
	fmt.Fprintln(out, "ready")
	go func() {
		for {
			info, err := s.Snapshot(ctx)
			if err != nil {
				fmt.Fprintln(out, "snaperror", err)
				continue
			}
			fmt.Fprintln(out, "snap", info.Len)
		}
	}()
	for i := 0; ; i++ {
		k := crashKey(i)
		if err := s.Push(ctx, k, Record{Value: val(k, crashValue), Fields: map[string]float64{"priority": float64(1 + i%3)}}); err != nil {
			fmt.Fprintln(out, "error", err)
			os.Exit(2)
		}
		if durability == Sync {
			fmt.Fprintln(out, "ack", i)
		} else if i%64 == 63 {
			if err := s.Flush(ctx); err != nil {
				fmt.Fprintln(out, "error", err)
				os.Exit(2)
			}
			fmt.Fprintln(out, "flushed", i+1)
		}
	}
}

// TestCrash SIGKILLs a child that is pushing (and snapshotting) at a
// seeded random moment, 24 times, then reopens its directory and restores
// its newest snapshot. Neither may fail, and neither may lose what
// doc.go says survives:
//
//   - Sync: every acknowledged push is in the reopened store.
//   - WriteBack: every push before the last completed Flush is.
//   - A restored snapshot holds exactly the keys pushed before it, all
//     intact (a prefix, since the child pushes in order), at least up to
//     the last snapshot the child saw complete.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 24 child processes")
	}
	const trials = 24
	r := rng.New(2026, "persist/test/crash", 0)
	for trial := 0; trial < trials; trial++ {
		sync := trial%2 == 0
		delay := time.Duration(60+r.IntN(300)) * time.Millisecond
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvSync+"="+map[bool]string{true: "1", false: "0"}[sync])
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for "ready", then let it run for the seeded delay.
		var ack, flushed, snap = -1, 0, 0
		var childErr string
		parse := func(l string) {
			f := strings.Fields(l)
			if len(f) < 2 {
				return
			}
			n, _ := strconv.Atoi(f[1])
			switch f[0] {
			case "ack":
				ack = n
			case "flushed":
				flushed = n
			case "snap":
				snap = max(snap, n)
			case "error", "snaperror":
				childErr = l
			}
		}
		readyBy := time.After(60 * time.Second)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					_ = cmd.Wait()
					t.Fatalf("trial %d: child exited before ready: %s", trial, childErr)
				}
				if l == "ready" {
					break wait
				}
				parse(l)
			case <-readyBy:
				_ = cmd.Process.Kill()
				t.Fatal("child never became ready")
			}
		}
		time.Sleep(delay)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for l := range lines {
			parse(l)
		}
		_ = cmd.Wait()
		if childErr != "" {
			t.Fatalf("trial %d: child reported %s", trial, childErr)
		}

		// 1. Reopen the crashed directory.
		s, err := Open(ctx, Options{Mode: Hybrid, Dir: filepath.Join(dir, "store"), CacheMB: 1, SnapshotEvery: -1})
		if err != nil {
			t.Fatalf("trial %d: reopen after crash: %v", trial, err)
		}
		must := flushed
		if sync {
			must = ack + 1
		}
		n := s.Len()
		for i := 0; i < max(must, n+8); i++ {
			v, err := s.Get(crashKey(i))
			if errors.Is(err, ErrNotFound) && i >= must {
				continue
			}
			if err != nil {
				t.Fatalf("trial %d (sync=%v): key %d of %d promised: %v", trial, sync, i, must, err)
			}
			if !bytes.Equal(v, val(crashKey(i), crashValue)) {
				t.Fatalf("trial %d: key %d corrupt after reopen", trial, i)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// 2. Restore the newest complete snapshot into a fresh directory.
		rs, err := Open(ctx, Options{Mode: Hybrid, Dir: filepath.Join(dir, "restored"), CacheMB: 1,
			RestoreFrom: "file://" + filepath.ToSlash(filepath.Join(dir, "snaps")) + "?create_dir=1",
			Samplers:    []Sampler{NewUniform("uniform"), NewPrioritized("per", "priority", 1)}})
		if errors.Is(err, ErrNoSnapshot) && snap == 0 {
			t.Logf("trial %d: killed before any snapshot completed", trial)
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: restore after crash: %v", trial, err)
		}
		L := rs.Len()
		if L < snap {
			t.Fatalf("trial %d: restored %d keys, but a snapshot of %d had completed", trial, L, snap)
		}
		for i := 0; i < L+8; i++ {
			v, err := rs.Get(crashKey(i))
			if i >= L {
				if err == nil {
					t.Fatalf("trial %d: snapshot of %d keys holds key %d: not a prefix", trial, L, i)
				}
				continue
			}
			if err != nil || !bytes.Equal(v, val(crashKey(i), crashValue)) {
				t.Fatalf("trial %d: snapshot key %d of %d: %v", trial, i, L, err)
			}
		}
		if err := rs.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("trial %d sync=%v killed after %v: acked %d, flushed %d, reopened %d keys; snapshot seen %d, restored %d",
			trial, sync, delay, ack+1, flushed, n, snap, L)
	}
}
