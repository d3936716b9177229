package distexec

import (
	"context"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/transport"
)

// scalarLog keeps the last value of each scalar.
type scalarLog map[string]float64

func (scalarLog) Episode(int64, float64, int)     {}
func (l scalarLog) Scalar(name string, v float64) { l[name] = v }
func (scalarLog) Step(int64)                      {}

// monitorStreams are a run's membership and sample stream in process,
// closed with the test.
func monitorStreams(t *testing.T) (transport.Membership, transport.SampleStream) {
	t.Helper()
	ctx := context.Background()
	tr := transport.NewInproc()
	mem, err := tr.Membership(ctx, "r", transport.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	smp, err := tr.Samples(ctx, "r", transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smp.Close() })
	return mem, smp
}

// One env worker's records stop changing while the learner goes on
// learning from the other: the monitor counts one silence, names the
// worker once, and says when it is back. A healthy stretch, a slow
// learner (nothing learned from anyone) and a registered idle policy
// worker count nothing.
func TestMonitorSilence(t *testing.T) {
	ctx := context.Background()
	mem, smp := monitorStreams(t)
	policy, err := mem.Register(ctx, "policy-0", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"env-0", "env-1"} {
		l, err := mem.Register(ctx, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	if err := mem.Save(ctx, "policy-0", transport.Progress{Incarnation: 1}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	log := scalarLog{}
	m := newMonitor(log, smp, mem, &out, 0)
	clock := time.Unix(1e9, 0)
	m.now = func() time.Time { return clock }
	seq := map[string]uint64{}
	// tick is one second of the run: the named env workers push a sample
	// each, the learner learns learned samples.
	tick := func(learned uint64, pushing ...string) {
		t.Helper()
		for _, n := range pushing {
			seq[n]++
			if err := mem.Save(ctx, n, transport.Progress{Incarnation: 1, Seq: seq[n], Steps: int64(seq[n]) * 128}); err != nil {
				t.Fatal(err)
			}
		}
		m.cnt.Learned += learned
		m.step += int64(learned) * 128
		clock = clock.Add(time.Second)
		m.scalars(ctx, false)
	}
	check := func(when string, silent, silences float64, notices int) {
		t.Helper()
		if log["dist/silent_workers"] != silent || log["dist/silences"] != silences {
			t.Errorf("%s: silent_workers %v, silences %v; want %v, %v", when, log["dist/silent_workers"], log["dist/silences"], silent, silences)
		}
		if n := strings.Count(out.String(), "\n"); n != notices {
			t.Errorf("%s: %d notices, want %d:\n%s", when, n, notices, out.String())
		}
	}
	for range 60 {
		tick(2, "env-0", "env-1")
	}
	check("healthy", 0, 0, 0)
	// A slow learner: nobody's samples are taken for 30 s.
	for range 30 {
		tick(0)
	}
	check("slow learner", 0, 0, 0)
	for range 30 {
		tick(2, "env-1")
	}
	check("env-0 cut off", 1, 1, 1)
	if s := out.String(); !strings.Contains(s, "dist: env-0 silent for ") || !strings.Contains(s, "env workers alive: env-0, env-1") {
		t.Errorf("notice: %q", s)
	}
	for range 10 {
		tick(2, "env-0", "env-1")
	}
	check("env-0 back", 0, 1, 2)
	if s := out.String(); !strings.Contains(s, "dist: env-0 back after ") {
		t.Errorf("notice: %q", s)
	}
	// The idle policy worker went silent only once its registration went.
	if err := policy.Close(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		tick(2, "env-0", "env-1")
	}
	check("policy-0 gone", 1, 2, 3)
	if s := out.String(); !strings.Contains(s, "dist: policy-0 silent for ") {
		t.Errorf("notice: %q", s)
	}
}

// TestMonitorDropNotice: more than 5% of the segments dropped for their
// lag gives one notice naming the share and the bound, not before 20
// segments and not again; at 5% or less none.
func TestMonitorDropNotice(t *testing.T) {
	ctx := context.Background()
	mem, smp := monitorStreams(t)
	for _, c := range []struct {
		learned, dropped uint64
		want             bool
	}{{19, 1, false}, {10, 5, false}, {95, 5, false}, {94, 6, true}, {14, 6, true}} {
		var out strings.Builder
		m := newMonitor(scalarLog{}, smp, mem, &out, 0)
		m.maxLag = 32
		m.cnt.Learned, m.cnt.Dropped = c.learned, c.dropped
		m.scalars(ctx, false)
		m.scalars(ctx, false)
		got := out.String()
		if c.want != strings.Contains(got, "max_policy_lag 32") || strings.Count(got, "dropped") > 1 {
			t.Errorf("%d learned, %d dropped: notices %q, want one: %v", c.learned, c.dropped, got, c.want)
		}
	}
}

// TestMaxLagDefault: the default lag bound is 32 or twice the env
// workers, the larger; a set bound is kept, −1 is none.
func TestMaxLagDefault(t *testing.T) {
	for _, c := range []struct {
		opt  Options
		rtE  int
		want uint64
	}{{Options{}, 0, 32}, {Options{EnvWorkers: 4}, 0, 32}, {Options{EnvWorkers: 48}, 0, 96}, {Options{}, 48, 96},
		{Options{EnvWorkers: 48, MaxPolicyLag: 10}, 0, 10}, {Options{EnvWorkers: 48, MaxPolicyLag: -1}, 0, 0}} {
		var h algo.Header
		h.Runtime.EnvWorkers = c.rtE
		if got := maxLagOf(c.opt, h); got != c.want {
			t.Errorf("%+v, runtime env_workers %d: bound %d, want %d", c.opt, c.rtE, got, c.want)
		}
	}
}

// Samples acknowledged and never learned are counted in dist/discarded:
// those a drain took, and, in the final row only, those left in the
// learner's queue (before, both were discarded uncounted).
func TestMonitorCountsDiscarded(t *testing.T) {
	ctx := context.Background()
	mem, smp := monitorStreams(t)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := smp.Push(ctx, transport.SampleID{Slot: 0, Incarnation: 1, Seq: seq}, []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	log := scalarLog{}
	m := newMonitor(log, smp, mem, &strings.Builder{}, 0)
	m.drained = 2
	m.scalars(ctx, false)
	if got := log["dist/discarded"]; got != 2 {
		t.Errorf("mid-run dist/discarded %v, want 2 (the drain's; queued samples are still to be learned)", got)
	}
	m.scalars(ctx, true)
	if got := log["dist/discarded"]; got != 5 {
		t.Errorf("final dist/discarded %v, want 5 (2 drained + 3 left queued)", got)
	}
}
