package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
						out, err := c.AllGather(ctx, fmt.Appendf(nil, "r%d-m%d", r, i))
						if err != nil {
							errs[i] = err
							return
						}
						for j, b := range out {
							if want := fmt.Sprintf("r%d-m%d", r, j); string(b) != want {
								errs[i] = fmt.Errorf("member %d round %d: out[%d] = %q, want %q", i, r, j, b, want)
								return
							}
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
