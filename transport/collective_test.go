package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCollectiveConformance(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		t.Run("every member gets every contribution in member order", func(t *testing.T) {
			const M, rounds = 3, 5
			cs := make([]Collective, M)
			for i := range M {
				c, err := w.tr(t).Collective(ctxT(t, 5*time.Second), runID(t), Options{Learner: i, Learners: M})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				cs[i] = c
			}
			ctx := ctxT(t, 20*time.Second)
			var wg sync.WaitGroup
			errs := make([]error, M)
			for i, c := range cs {
				wg.Go(func() {
					for r := range rounds {
						// Members start the first round at different times:
						// the last joins late.
						if r == 0 && i == M-1 {
							time.Sleep(50 * time.Millisecond)
						}
						if errs[i] = checkedRound(ctx, c, i, r); errs[i] != nil {
							return
						}
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("a silent member fails the round naming it", func(t *testing.T) {
			opt := Options{Learner: 0, Learners: 2, GatherTimeout: 300 * time.Millisecond}
			c, err := w.tr(t).Collective(ctxT(t, 5*time.Second), runID(t), opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			_, err = c.AllGather(ctxT(t, 10*time.Second), []byte("x"))
			if !errors.Is(err, ErrGather) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want ErrGather and a deadline", err)
			}
			if want := "nothing from learner(s) [1]"; !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
		})
		t.Run("a member that leaves or starts again fails the group at once, naming it", func(t *testing.T) {
			const timeout = time.Minute // far above what "at once" allows
			for _, restart := range []bool{false, true} {
				run := fmt.Sprintf("%s_%v", runID(t)[:40], restart)
				cs := make([]Collective, 2)
				trs := make([]Transport, 2)
				for i := range cs {
					trs[i] = w.tr(t)
					c, err := trs[i].Collective(ctxT(t, 5*time.Second), run, Options{Learner: i, Learners: 2, GatherTimeout: timeout})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = c.Close() })
					cs[i] = c
				}
				ctx := ctxT(t, 20*time.Second)
				for r := range 3 {
					var wg sync.WaitGroup
					errs := make([]error, 2)
					for i, c := range cs {
						wg.Go(func() { errs[i] = checkedRound(ctx, c, i, r) })
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						t.Fatal(err)
					}
				}
				// Member 1 stops: it leaves (Close), or it is killed (its
				// connection gone, no goodbye) and starts again.
				want := "learner 1 left the group"
				if !restart {
					_ = cs[1].Close()
				} else if n, ok := trs[1].(*NATS); ok {
					n.nc.Close()
				}
				t0 := time.Now()
				survivor := make(chan error, 1)
				go func() { _, err := cs[0].AllGather(ctx, []byte("r3-m0")); survivor <- err }()
				if restart {
					want = "learner 1 started again"
					time.Sleep(50 * time.Millisecond) // member 0 waits in round 4
					c, err := w.tr(t).Collective(ctxT(t, 5*time.Second), run, Options{Learner: 1, Learners: 2, GatherTimeout: timeout})
					if err == nil {
						t.Cleanup(func() { _ = c.Close() })
						_, err = c.AllGather(ctx, []byte("r0-m1"))
					}
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("the restarted member: %v, want an error saying %q", err, want)
					}
				}
				err := <-survivor
				if d := time.Since(t0); !errors.Is(err, ErrGather) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) || d > 10*time.Second {
					t.Errorf("restart %v: member 0's round after %v: %v; want ErrGather at once saying %q", restart, d, err, want)
				}
			}
		})
		t.Run("bad options are refused", func(t *testing.T) {
			for _, o := range []Options{{Learner: 2, Learners: 2}, {Learner: -1, Learners: 2}, {}} {
				if _, err := w.tr(t).Collective(ctxT(t, 5*time.Second), runID(t), o); !errors.Is(err, ErrBadRequest) {
					t.Errorf("%+v: got %v, want ErrBadRequest", o, err)
				}
			}
		})
	})
}

// Each learner has its own sample queue: a push to learner 1 is pulled by
// learner 1 only.
func TestSampleQueuePerLearner(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		l0 := sampleStream(t, w, Options{})
		l1 := sampleStream(t, w, Options{Learner: 1})
		ctx := ctxT(t, 10*time.Second)
		// Pull first so that the NATS learners have joined their queues.
		got := make(chan string, 2)
		for i, s := range []SampleStream{l0, l1} {
			go func() {
				b, err := s.Pull(ctx)
				if err == nil {
					got <- fmt.Sprintf("learner %d: %s", i, b)
				}
			}()
		}
		p1 := sampleStream(t, w, Options{Learner: 1})
		if err := p1.Push(ctx, SampleID{Slot: 1, Incarnation: 1, Seq: 1}, []byte("to-1")); err != nil {
			t.Fatal(err)
		}
		p0 := sampleStream(t, w, Options{})
		if err := p0.Push(ctx, SampleID{Slot: 0, Incarnation: 1, Seq: 1}, []byte("to-0")); err != nil {
			t.Fatal(err)
		}
		var all []string
		for range 2 {
			select {
			case b := <-got:
				all = append(all, b)
			case <-ctx.Done():
				t.Fatal("a sample did not arrive")
			}
		}
		slices.Sort(all)
		if !slices.Equal(all, []string{"learner 0: to-0", "learner 1: to-1"}) {
			t.Fatalf("pulled %q", all)
		}
	})
}

// checkedRound runs member i's round r, contributing "r<r>-m<i>", and
// checks that every member's contribution came back in member order.
func checkedRound(ctx context.Context, c Collective, i, r int) error {
	out, err := c.AllGather(ctx, fmt.Appendf(nil, "r%d-m%d", r, i))
	if err != nil {
		return err
	}
	for j, b := range out {
		if want := fmt.Sprintf("r%d-m%d", r, j); string(b) != want {
			return fmt.Errorf("member %d round %d: out[%d] = %q, want %q", i, r, j, b, want)
		}
	}
	return nil
}

// restartableServer starts a NATS server on a port and store that a
// second StartServer can take again after Shutdown.
func restartableServer(t *testing.T) (srv *Server, restart func() *Server) {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	start := func() *Server {
		srv, err := StartServer(ServerOptions{Port: port, StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	return start(), start
}

// TestGatherResendsLostContributions drops contributions as a node loss
// does and checks every round still completes with the right bytes: a
// member's message to a round it has already left (learner 0's round 2,
// which learner 1 never gets while learner 0 goes on to round 3), and a
// message to the current round (learner 1's round 5). The members ask for
// what they miss and the others send it again.
func TestGatherResendsLostContributions(t *testing.T) {
	srv := startServer(t)
	run := runID(t)
	const M, rounds = 2, 8
	cs := make([]*natsCollective, M)
	for i := range M {
		c, err := natsTransport(t, srv.URL()).Collective(ctxT(t, 5*time.Second), run, Options{Learner: i, Learners: M, GatherTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c.(*natsCollective)
	}
	var mu sync.Mutex
	dropped := map[[2]uint64]bool{}
	for i, c := range cs {
		lose := map[int]uint64{0: 2, 1: 5}[i]
		c.publishHook = func(round uint64, want bool, _ int) bool {
			mu.Lock()
			defer mu.Unlock()
			k := [2]uint64{uint64(i), round}
			if round == lose && !want && !dropped[k] {
				dropped[k] = true
				return true
			}
			return false
		}
	}
	ctx := ctxT(t, 30*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, M)
	for i, c := range cs {
		wg.Go(func() {
			for r := range rounds {
				if errs[i] = checkedRound(ctx, c, i, r); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 {
		t.Fatalf("dropped %v, want learner 0's round 2 and learner 1's round 5", dropped)
	}
	s0, s1 := cs[0].GatherStats(), cs[1].GatherStats()
	if s1.Requests == 0 || s0.Resent == 0 || s0.Requests == 0 || s1.Resent == 0 {
		t.Errorf("stats %+v and %+v: want requests and resends on both sides", s0, s1)
	}
	t.Logf("learner 0 %+v, learner 1 %+v", s0, s1)
}

// TestGatherAcrossServerRestart runs rounds while the NATS server
// restarts under the members: messages in flight are lost and sent again,
// and every round completes.
func TestGatherAcrossServerRestart(t *testing.T) {
	srv, restart := restartableServer(t)
	defer func() { srv.Shutdown() }()
	run := runID(t)
	const M = 2
	cs := make([]Collective, M)
	for i := range M {
		c, err := natsTransport(t, srv.URL()).Collective(ctxT(t, 5*time.Second), run, Options{Learner: i, Learners: M, GatherTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	ctx := ctxT(t, 60*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, M)
	var rounds [M]atomic.Int64
	var stopAt atomic.Int64 // the round both members end before, once set
	for i, c := range cs {
		wg.Go(func() {
			for r := 0; ; r++ {
				if s := stopAt.Load(); s > 0 && int64(r) >= s {
					return
				}
				if errs[i] = checkedRound(ctx, c, i, r); errs[i] != nil {
					return
				}
				rounds[i].Add(1)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	srv.Shutdown()
	time.Sleep(300 * time.Millisecond)
	srv = restart()
	// Members are at most one round apart: both end before the same round,
	// 20 after the one the first is in now.
	before := rounds[0].Load()
	stopAt.Store(max(rounds[0].Load(), rounds[1].Load()) + 20)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("rounds before the restart %d, in all %d", before, rounds[0].Load())
}

// In one process, a member that shares a value where another sends bytes
// (calls that diverged) fails the round of both with ErrGather instead of
// misreading it.
func TestInprocShareMixedWithBytes(t *testing.T) {
	ip := NewInproc()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c0, err := ip.Collective(ctx, "mix", Options{Learner: 0, Learners: 2})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := ip.Collective(ctx, "mix", Options{Learner: 1, Learners: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c0.(Sharer).Share(ctx, 42)
		done <- err
	}()
	if _, err := c1.AllGather(ctx, []byte{1}); !errors.Is(err, ErrGather) || !strings.Contains(err.Error(), "learner 0 shared a value") {
		t.Errorf("AllGather against a Share: %v, want ErrGather naming learner 0", err)
	}
	if err := <-done; !errors.Is(err, ErrGather) || !strings.Contains(err.Error(), "learner 1 sent bytes") {
		t.Errorf("Share against an AllGather: %v, want ErrGather naming learner 1", err)
	}
}
