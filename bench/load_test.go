package bench

import (
	"context"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"testing"
)

// TestMain lets the test binary stand in for herd when startLoad
// re-executes it as a busy loop (os.Executable is the test binary here).
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "bench" && os.Args[2] == SpinCommand {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := unpinSelf(); err != nil {
			os.Exit(1)
		}
		spin(ctx)
		return
	}
	os.Exit(m.Run())
}

// TestLoadStartsAndStops: startLoad's processes are running until stop,
// and gone (reaped) after it.
func TestLoadStartsAndStops(t *testing.T) {
	l, err := startLoad(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.procs) != 2 {
		t.Fatalf("%d processes, want 2", len(l.procs))
	}
	var pids []int
	for _, c := range l.procs {
		pids = append(pids, c.Process.Pid)
		if err := syscall.Kill(c.Process.Pid, 0); err != nil {
			t.Errorf("busy loop %d not running: %v", c.Process.Pid, err)
		}
	}
	if err := l.stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("busy loop %d still exists after stop", pid)
		}
	}
	if err := l.stop(); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 50}); m != 3 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 2, 50}); m != 3 {
		t.Errorf("median even = %v", m)
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"0": {0}, "0,2": {0, 2}, "0-3": {0, 1, 2, 3}, "1-2,1,5": {1, 2, 5}, "all": nil} {
		got, err := parseCPUList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "1-", "2-1", "-3", "5000"} {
		if _, err := parseCPUList(in); err == nil {
			t.Errorf("parseCPUList(%q): want an error", in)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	got, err := parseSeeds("1-3,7")
	if err != nil || len(got) != 4 || got[0] != 1 || got[2] != 3 || got[3] != 7 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1", "1-", "1-100000"} {
		if _, err := parseSeeds(bad); err == nil {
			t.Errorf("parseSeeds(%q): want an error", bad)
		}
	}
}
