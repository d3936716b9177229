package transport

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/nn"
	"herd/weights"
)

// world is one carrier for a conformance test: every call to tr is a new
// "process" (its own NATS connection, or the shared Inproc).
type world struct {
	name string
	tr   func(t *testing.T) Transport
	srv  *Server // nil for the in-process world
}

// forEachWorld runs f against the in-process twin and against an embedded
// NATS server on loopback with a random port.
func forEachWorld(t *testing.T, f func(t *testing.T, w *world)) {
	t.Run("inproc", func(t *testing.T) {
		ip := NewInproc()
		f(t, &world{name: "inproc", tr: func(*testing.T) Transport { return ip }})
	})
	t.Run("nats", func(t *testing.T) {
		srv := startServer(t)
		f(t, &world{name: "nats", srv: srv, tr: func(t *testing.T) Transport { return natsTransport(t, srv.URL()) }})
	})
}

func startServer(t *testing.T) *Server {
	t.Helper()
	srv, err := StartServer(ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func natsTransport(t testing.TB, url string) *NATS {
	t.Helper()
	nc, err := nats.Connect(url, nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	n, err := NewNATS(nc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var unsafeRun = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// runID names the test's run so subtests on one server stay apart.
func runID(t *testing.T) string {
	s := unsafeRun.ReplaceAllString(t.Name(), "_")
	if len(s) > 64 {
		s = s[len(s)-64:]
	}
	return s
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually waits (sleeping, never spinning) until cond holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ---- inference ----

const obsDim, outDim = 3, 2

var inferOpt = Options{ObsDim: obsDim, OutDim: outDim}

// policyFn is the test policy: out[r] = (Σ obs[r], version) so a test can
// check every row was answered from its own observations.
func policyFn(version uint64, sizes *[]int, mu *sync.Mutex) BatchHandler {
	return func(ctx context.Context, batch []*InferRequest) error {
		if sizes != nil {
			mu.Lock()
			*sizes = append(*sizes, len(batch))
			mu.Unlock()
		}
		for _, r := range batch {
			for i := range r.Rows {
				var s float32
				for _, x := range r.Obs[i*obsDim : (i+1)*obsDim] {
					s += x
				}
				r.Out[i*outDim], r.Out[i*outDim+1] = s, float32(version)
			}
			r.WeightsVersion = version
		}
		return nil
	}
}

func serve(t *testing.T, s InferenceStream, h BatchHandler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func inferStream(t *testing.T, w *world, opt Options) InferenceStream {
	t.Helper()
	s, err := w.tr(t).Inference(ctxT(t, 5*time.Second), runID(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// infer checks one request of rows rows whose observations start at base.
func infer(ctx context.Context, s InferenceStream, r *InferRequest, worker, rows int, base float32) error {
	r.Worker, r.Rows, r.Obs = worker, rows, r.Obs[:0]
	for i := range rows * obsDim {
		r.Obs = append(r.Obs, base+float32(i))
	}
	if err := s.Infer(ctx, r); err != nil {
		return err
	}
	for i := range rows {
		want := 3*(base+float32(i*obsDim)) + 3
		if r.Out[i*outDim] != want || len(r.Out) != rows*outDim {
			return fmt.Errorf("row %d: got %v, want %v (len %d)", i, r.Out[i*outDim], want, len(r.Out))
		}
	}
	return nil
}

func TestInferenceConformance(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		t.Run("answers", func(t *testing.T) {
			client, server := inferStream(t, w, inferOpt), inferStream(t, w, inferOpt)
			serve(t, server, policyFn(7, nil, nil))
			ctx := ctxT(t, 20*time.Second)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 8 {
				wg.Go(func() {
					var r InferRequest
					for i := range 40 {
						if err := infer(ctx, client, &r, g, 1+(g+i)%5, float32(100*g+i)); err != nil {
							errs <- err
							return
						}
						if r.WeightsVersion != 7 {
							errs <- fmt.Errorf("weights version %d", r.WeightsVersion)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
		t.Run("batches what arrived while the last batch ran", func(t *testing.T) {
			s := inferStream(t, w, inferOpt)
			release := make(chan struct{})
			var mu sync.Mutex
			var sizes []int
			inner := policyFn(1, &sizes, &mu)
			var first atomic.Bool
			first.Store(true)
			serve(t, s, func(ctx context.Context, b []*InferRequest) error {
				if first.CompareAndSwap(true, false) {
					<-release
				}
				return inner(ctx, b)
			})
			ctx := ctxT(t, 20*time.Second)
			var wg sync.WaitGroup
			wg.Go(func() { _ = infer(ctx, s, &InferRequest{}, 0, 1, 0) })
			eventually(t, 5*time.Second, "first request in the handler", func() bool { return !first.Load() })
			for g := range 5 {
				wg.Go(func() {
					if err := infer(ctx, s, &InferRequest{}, g+1, 2, float32(g)); err != nil {
						t.Error(err)
					}
				})
			}
			time.Sleep(500 * time.Millisecond) // let all five arrive while the first batch runs
			close(release)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(sizes, []int{1, 5}) {
				t.Errorf("batch sizes %v, want [1 5]", sizes)
			}
		})
		t.Run("a request whose sender left is skipped and counted", func(t *testing.T) {
			s := inferStream(t, w, inferOpt)
			release := make(chan struct{})
			var mu sync.Mutex
			var sizes []int
			inner := policyFn(1, &sizes, &mu)
			var first atomic.Bool
			first.Store(true)
			serve(t, s, func(ctx context.Context, b []*InferRequest) error {
				if first.CompareAndSwap(true, false) {
					<-release
				}
				return inner(ctx, b)
			})
			ctx := ctxT(t, 20*time.Second)
			var wg sync.WaitGroup
			wg.Go(func() { _ = infer(ctx, s, &InferRequest{}, 0, 1, 0) })
			eventually(t, 5*time.Second, "first request in the handler", func() bool { return !first.Load() })
			// Sent while the policy worker is busy, given up before it is free.
			c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if err := infer(c, s, &InferRequest{}, 1, 3, 0); err == nil {
				t.Error("a request answered while the only policy worker was blocked")
			}
			cancel()
			time.Sleep(200 * time.Millisecond)
			close(release)
			wg.Wait()
			if err := infer(ctx, s, &InferRequest{}, 2, 2, 0); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(sizes, []int{1, 1}) { // requests per batch
				t.Errorf("batch sizes %v, want [1 1]: the abandoned request was served", sizes)
			}
			if a := s.Stats().Abandoned; a != 1 {
				t.Errorf("%d abandoned requests counted, want 1", a)
			}
		})
		t.Run("policy workers share the load", func(t *testing.T) {
			s := inferStream(t, w, inferOpt)
			var n [2]atomic.Int64
			for k := range 2 {
				h := policyFn(1, nil, nil)
				serve(t, inferStream(t, w, inferOpt), func(ctx context.Context, b []*InferRequest) error {
					n[k].Add(int64(len(b)))
					time.Sleep(2 * time.Millisecond)
					return h(ctx, b)
				})
			}
			ctx := ctxT(t, 20*time.Second)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					var r InferRequest
					for i := range 50 {
						if err := infer(ctx, s, &r, g, 1, float32(i)); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if n[0].Load() == 0 || n[1].Load() == 0 || n[0].Load()+n[1].Load() != 200 {
				t.Errorf("served %d and %d requests, want both > 0 and 200 in all", n[0].Load(), n[1].Load())
			}
		})
		t.Run("a killed policy worker stalls nobody for long", func(t *testing.T) {
			s := inferStream(t, w, inferOpt)
			stops := []func(){serve(t, inferStream(t, w, inferOpt), policyFn(1, nil, nil)),
				serve(t, inferStream(t, w, inferOpt), policyFn(1, nil, nil))}
			ctx := ctxT(t, 20*time.Second)
			var worst atomic.Int64
			var done atomic.Int64
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					var r InferRequest
					for i := 0; done.Load() < 400; i++ {
						t0 := time.Now()
						for { // what a role does: a bounded wait, then retry
							c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
							err := infer(c, s, &r, g, 1, float32(i))
							cancel()
							if err == nil {
								break
							}
							if ctx.Err() != nil {
								t.Error(err)
								return
							}
						}
						worst.Store(max(worst.Load(), int64(time.Since(t0))))
						done.Add(1)
					}
				})
			}
			eventually(t, 10*time.Second, "100 answers", func() bool { return done.Load() >= 100 })
			stops[0]()
			wg.Wait()
			if d := time.Duration(worst.Load()); d > 2*time.Second {
				t.Errorf("longest stall %v, want ≤ 2 s", d)
			}
		})
		t.Run("errors", func(t *testing.T) {
			s := inferStream(t, w, inferOpt)
			ctx := ctxT(t, 10*time.Second)
			if err := s.Infer(ctx, &InferRequest{Rows: 2, Obs: make([]float32, 5)}); !errors.Is(err, ErrBadRequest) {
				t.Errorf("bad rows: %v, want ErrBadRequest", err)
			}
			serve(t, s, func(context.Context, []*InferRequest) error { return errors.New("boom") })
			if err := s.Infer(ctx, &InferRequest{Rows: 1, Obs: make([]float32, obsDim)}); !errors.Is(err, ErrRejected) {
				t.Errorf("handler error: %v, want ErrRejected", err)
			}
			if _, err := w.tr(t).Inference(ctx, "bad.run", inferOpt); !errors.Is(err, ErrName) {
				t.Errorf("bad run ID: %v, want ErrName", err)
			}
			if _, err := w.tr(t).Inference(ctx, "r", Options{}); !errors.Is(err, ErrBadRequest) {
				t.Errorf("no dims: %v, want ErrBadRequest", err)
			}
			c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			s2, err := w.tr(t).Inference(ctx, runID(t)+"_nobody", inferOpt)
			if err != nil {
				t.Fatal(err)
			}
			if err := s2.Infer(c, &InferRequest{Rows: 1, Obs: make([]float32, obsDim)}); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("no policy worker: %v, want the deadline", err)
			}
			_ = s.Close()
			if err := s.Infer(ctx, &InferRequest{Rows: 1, Obs: make([]float32, obsDim)}); !errors.Is(err, ErrClosed) {
				t.Errorf("after Close: %v, want ErrClosed", err)
			}
		})
	})
}

// ---- samples ----

func sampleStream(t *testing.T, w *world, opt Options) SampleStream {
	t.Helper()
	s, err := w.tr(t).Samples(ctxT(t, 5*time.Second), runID(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSampleConformance(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		t.Run("every sample reaches one learner", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			learners := []SampleStream{sampleStream(t, w, Options{}), sampleStream(t, w, Options{})}
			var mu sync.Mutex
			var got []string
			var lw sync.WaitGroup
			lctx, stop := context.WithCancel(ctx)
			for _, l := range learners {
				lw.Go(func() {
					for {
						b, err := l.Pull(lctx)
						if err != nil {
							return
						}
						mu.Lock()
						got = append(got, string(b))
						mu.Unlock()
					}
				})
			}
			var want []string
			var pw sync.WaitGroup
			for p := range 3 {
				s := sampleStream(t, w, Options{})
				for i := range 30 {
					want = append(want, fmt.Sprintf("p%d-%d", p, i))
				}
				pw.Go(func() {
					for i := range 30 {
						if err := s.Push(ctx, SampleID{Slot: p}, fmt.Appendf(nil, "p%d-%d", p, i)); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			pw.Wait()
			eventually(t, 10*time.Second, "all samples pulled", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= len(want) })
			stop()
			lw.Wait()
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("got %d samples %v…, want %d", len(got), got[:min(5, len(got))], len(want))
			}
		})
		t.Run("back-pressure bounds what is in flight", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			const capacity = 2
			learner, pusher := sampleStream(t, w, Options{Capacity: capacity}), sampleStream(t, w, Options{Capacity: capacity})
			var pushed atomic.Int64
			done := make(chan error, 1)
			go func() {
				for i := range 10 {
					if err := pusher.Push(ctx, SampleID{Slot: 0}, []byte{byte(i)}); err != nil {
						done <- err
						return
					}
					pushed.Add(1)
				}
				done <- nil
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Error(err)
				}
			}()
			if b, err := learner.Pull(ctx); err != nil || b[0] != 0 {
				t.Fatalf("first pull: %v %v", b, err)
			}
			// One pulled plus a full queue are acknowledged; the next push waits.
			eventually(t, 5*time.Second, "queue full", func() bool { return pushed.Load() >= 1+capacity })
			time.Sleep(200 * time.Millisecond)
			if n := pushed.Load(); n != 1+capacity {
				t.Fatalf("%d pushes acknowledged with one pulled and capacity %d, want %d", n, capacity, 1+capacity)
			}
			for i := 1; i < 10; i++ {
				if b, err := learner.Pull(ctx); err != nil || len(b) != 1 {
					t.Fatalf("pull %d: %v %v", i, b, err)
				}
			}
		})
		t.Run("no queue: a push returns when pulled", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			learner, pusher := sampleStream(t, w, Options{Capacity: NoQueue}), sampleStream(t, w, Options{Capacity: NoQueue})
			c0, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, _ = learner.Pull(c0) // joins
			cancel()
			done := make(chan error, 1)
			go func() { done <- pusher.Push(ctx, SampleID{Slot: 0, Incarnation: 1, Seq: 1}, []byte("x")) }()
			select {
			case err := <-done:
				t.Fatalf("push returned (%v) before any pull", err)
			case <-time.After(300 * time.Millisecond):
			}
			if b, err := learner.Pull(ctx); err != nil || string(b) != "x" {
				t.Fatalf("pull: %q %v", b, err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
		t.Run("a push waits for a learner", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			pusher := sampleStream(t, w, Options{})
			errc := make(chan error, 1)
			go func() { errc <- pusher.Push(ctx, SampleID{Slot: 0}, []byte("late")) }()
			time.Sleep(100 * time.Millisecond)
			b, err := sampleStream(t, w, Options{}).Pull(ctx)
			if err != nil || string(b) != "late" {
				t.Fatalf("pull: %q %v", b, err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
		t.Run("a closed learner's share goes to the others", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			a, b, p := sampleStream(t, w, Options{Capacity: 1}), sampleStream(t, w, Options{Capacity: 1}), sampleStream(t, w, Options{Capacity: 1})
			got := make(chan []byte, 64)
			go func() {
				for {
					x, err := b.Pull(ctx)
					if err != nil {
						return
					}
					got <- x
				}
			}()
			c0, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, _ = a.Pull(c0) // joins, then the learner "crashes"
			cancel()
			_ = a.Close()
			for i := range 20 {
				for { // what a role does: a bounded wait, then retry
					c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					err := p.Push(c, SampleID{Slot: 0}, []byte{byte(i)})
					cancel()
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						t.Fatal(err)
					}
				}
			}
			eventually(t, 5*time.Second, "all at the live learner", func() bool { return len(got) >= 20 })
		})
		t.Run("a repeated id is queued once and counted", func(t *testing.T) {
			ctx := ctxT(t, 10*time.Second)
			l, p := sampleStream(t, w, Options{Capacity: 8}), sampleStream(t, w, Options{Capacity: 8})
			c0, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, _ = l.Pull(c0) // joins
			cancel()
			// Slot 3 pushes 1, 1, 2, 2 (two incarnations); slot 4 pushes 1.
			for _, x := range []struct {
				id  SampleID
				val string
			}{{SampleID{3, 1, 1}, "a"}, {SampleID{3, 1, 1}, "a again"}, {SampleID{3, 1, 2}, "b"},
				{SampleID{3, 2, 1}, "c"}, {SampleID{3, 2, 1}, "c again"}, {SampleID{4, 1, 1}, "d"},
				{SampleID{3, 1, 2}, "b again"}} {
				if err := p.Push(ctx, x.id, []byte(x.val)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for range 4 {
				b, err := l.Pull(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(b))
			}
			if want := []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
				t.Errorf("pulled %q, want %q", got, want)
			}
			c1, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			if b, err := l.Pull(c1); err == nil {
				t.Errorf("a fifth sample %q was queued", b)
			}
			if d := l.Stats().Duplicates; d != 3 {
				t.Errorf("learner counted %d duplicates, want 3", d)
			}
		})
		t.Run("errors", func(t *testing.T) {
			ctx := ctxT(t, 5*time.Second)
			s := sampleStream(t, w, Options{})
			if err := s.Push(ctx, SampleID{Slot: 0}, nil); !errors.Is(err, ErrBadRequest) {
				t.Errorf("empty push: %v", err)
			}
			_ = s.Close()
			if err := s.Push(ctx, SampleID{Slot: 0}, []byte{1}); !errors.Is(err, ErrClosed) {
				t.Errorf("push after Close: %v", err)
			}
			if _, err := s.Pull(ctx); !errors.Is(err, ErrClosed) {
				t.Errorf("pull after Close: %v", err)
			}
		})
	})
}

// ---- parameters ----

func testParams(n int) []*nn.Param {
	return []*nn.Param{
		{Name: "w", Shape: []int{n / 2, 2}, Value: make([]float32, n)},
		{Name: "b", Shape: []int{2}, Value: make([]float32, 2)},
	}
}

func version(n uint64, like []*nn.Param) *weights.Version {
	v := weights.New(n, like)
	for i := range v.Len() {
		for j := range v.Param(i).Value {
			v.Param(i).Value[j] = float32(n)*1000 + float32(j)
		}
	}
	return v
}

func paramService(t *testing.T, w *world, like []*nn.Param) ParamService {
	t.Helper()
	p, err := w.tr(t).Params(ctxT(t, 5*time.Second), runID(t), Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func sameVersion(t *testing.T, got, want *weights.Version) {
	t.Helper()
	if got == nil || got.N != want.N || got.Len() != want.Len() {
		t.Fatalf("got version %v, want %d", got, want.N)
	}
	for i := range want.Len() {
		if !slices.Equal(got.Param(i).Value, want.Param(i).Value) {
			t.Fatalf("version %d tensor %d differs", want.N, i)
		}
	}
}

func TestParamConformance(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		t.Run("publish, latest, wait", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			like := testParams(16)
			learner, worker := paramService(t, w, like), paramService(t, w, like)
			if v := worker.Latest(); v != nil {
				t.Fatalf("latest before any publish: %d", v.N)
			}
			got := make(chan *weights.Version, 1)
			go func() {
				v, err := worker.Wait(ctx, 2)
				if err != nil {
					t.Error(err)
				}
				got <- v
			}()
			for n := range uint64(3) {
				if err := learner.Publish(ctx, version(n, like)); err != nil {
					t.Fatal(err)
				}
			}
			v := <-got
			if v == nil || v.N < 2 {
				t.Fatalf("Wait(2) gave %v", v)
			}
			eventually(t, 5*time.Second, "latest is 2", func() bool { l := worker.Latest(); return l != nil && l.N == 2 })
			sameVersion(t, worker.Latest(), version(2, like))
			if err := learner.Publish(ctx, version(2, like)); !errors.Is(err, weights.ErrStale) {
				t.Errorf("republishing 2: %v, want ErrStale", err)
			}
			late := paramService(t, w, like)
			v, err := late.Wait(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			sameVersion(t, v, version(2, like))
			c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := late.Wait(c, 9); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait(9): %v, want the deadline", err)
			}
		})
		t.Run("large weights", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			like := testParams(1 << 20) // 4 MiB: chunked by the object store
			learner, worker := paramService(t, w, like), paramService(t, w, like)
			if err := learner.Publish(ctx, version(1, like)); err != nil {
				t.Fatal(err)
			}
			v, err := worker.Wait(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			sameVersion(t, v, version(1, like))
		})
	})
}

// ---- membership ----

func membership(t *testing.T, w *world, ttl time.Duration) Membership {
	t.Helper()
	m, err := w.tr(t).Membership(ctxT(t, 5*time.Second), runID(t), Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func names(t *testing.T, m Membership) []string {
	t.Helper()
	ms, err := m.Members(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range ms {
		out = append(out, x.Name+"="+string(x.Info))
	}
	return out
}

func TestMembershipConformance(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		const ttl = time.Second
		t.Run("progress outlives the worker; each start is a new incarnation", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			a, b := membership(t, w, ttl), membership(t, w, ttl)
			p, err := a.Resume(ctx, "env-0")
			if err != nil || p != (Progress{Incarnation: 1}) {
				t.Fatalf("first start: %+v %v", p, err)
			}
			if err := a.Save(ctx, "env-0", Progress{Incarnation: 1, Seq: 7, Steps: 700, FetchFailed: 2}); err != nil {
				t.Fatal(err)
			}
			// Two starts racing get different incarnations.
			var wg sync.WaitGroup
			incs := make([]uint64, 2)
			for i, m := range []Membership{a, b} {
				wg.Go(func() {
					p, err := m.Resume(ctx, "env-0")
					if err != nil || p.Seq != 7 || p.Steps != 700 || p.FetchFailed != 2 {
						t.Errorf("restart: %+v %v", p, err)
					}
					incs[i] = p.Incarnation
				})
			}
			wg.Wait()
			if slices.Sort(incs); incs[0] != 2 || incs[1] != 3 {
				t.Errorf("racing restarts got incarnations %v, want 2 and 3", incs)
			}
			if _, err := b.Resume(ctx, "policy-0"); err != nil {
				t.Fatal(err)
			}
			all, err := b.Progress(ctx)
			if err != nil || len(all) != 2 || all["env-0"].Incarnation != 3 || all["policy-0"].Incarnation != 1 {
				t.Errorf("progress of all: %+v %v", all, err)
			}
			if _, err := a.Resume(ctx, "bad name"); !errors.Is(err, ErrName) {
				t.Errorf("bad name: %v", err)
			}
		})
		t.Run("register, list, leave, expire", func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			ctrl, worker := membership(t, w, ttl), membership(t, w, ttl)
			lc, err := ctrl.Register(ctx, "controller", []byte("c"))
			if err != nil {
				t.Fatal(err)
			}
			defer lc.Close()
			wctx, crash := context.WithCancel(ctx)
			if _, err := worker.Register(wctx, "env-0", []byte("e0")); err != nil {
				t.Fatal(err)
			}
			l1, err := worker.Register(ctx, "env-1", []byte("e1"))
			if err != nil {
				t.Fatal(err)
			}
			if got := names(t, ctrl); !slices.Equal(got, []string{"controller=c", "env-0=e0", "env-1=e1"}) {
				t.Fatalf("members %v", got)
			}
			// Keep-alives hold a registration past its TTL.
			time.Sleep(2 * ttl)
			if got := names(t, ctrl); len(got) != 3 {
				t.Fatalf("after 2 TTLs with keep-alives: %v", got)
			}
			gone1, err := ctrl.Gone(ctx, "env-1")
			if err != nil {
				t.Fatal(err)
			}
			if err := l1.Close(); err != nil { // a clean exit: gone at once
				t.Fatal(err)
			}
			select {
			case <-gone1:
			case <-time.After(ttl / 2):
				t.Fatal("a closed lease was not gone within TTL/2")
			}
			gone0, err := ctrl.Gone(ctx, "env-0")
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			crash() // keep-alives stop as in a crash: gone within 2 × TTL
			select {
			case <-gone0:
			case <-time.After(3 * ttl):
				t.Fatal("a crashed member did not expire")
			}
			if d := time.Since(t0); d > 2*ttl+500*time.Millisecond {
				t.Errorf("expired after %v, want ≤ 2 × TTL", d)
			}
			if got := names(t, ctrl); !slices.Equal(got, []string{"controller=c"}) {
				t.Errorf("members after leave and crash: %v", got)
			}
		})
		t.Run("gone at once for an unknown name", func(t *testing.T) {
			m := membership(t, w, ttl)
			ch, err := m.Gone(ctxT(t, 5*time.Second), "nobody")
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-ch:
			case <-time.After(2 * time.Second):
				t.Fatal("Gone for an unknown name did not close")
			}
			if _, err := m.Register(context.Background(), "bad name", nil); !errors.Is(err, ErrName) {
				t.Errorf("bad name: %v, want ErrName", err)
			}
		})
	})
}

// ---- actor calls ----

func callStream(t *testing.T, w *world) CallStream {
	t.Helper()
	ct, ok := w.tr(t).(CallTransport)
	if !ok {
		t.Fatalf("%s: no CallTransport", w.name)
	}
	s, err := ct.Calls(ctxT(t, 5*time.Second), runID(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// serveActor runs Serve for actor with h until the test ends.
func serveActor(t *testing.T, s CallStream, actor string, h CallHandler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, actor, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
}

func TestCallConformance(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		t.Run("in order, exactly once, per actor", func(t *testing.T) {
			server, client := callStream(t, w), callStream(t, w)
			var mu sync.Mutex
			ran := map[string][]uint64{}
			for _, a := range []string{"w0", "w1"} {
				serveActor(t, server, a, func(_ context.Context, seq uint64, body []byte) ([]byte, error) {
					mu.Lock()
					ran[a] = append(ran[a], seq)
					mu.Unlock()
					return append([]byte(a+":"), body...), nil
				})
			}
			ctx := ctxT(t, 10*time.Second)
			for seq := uint64(1); seq <= 3; seq++ {
				for _, a := range []string{"w0", "w1"} {
					got, err := client.Call(ctx, a, seq, []byte{byte(seq)})
					if err != nil {
						t.Fatalf("%s call %d: %v", a, seq, err)
					}
					if want := append([]byte(a+":"), byte(seq)); !slices.Equal(got, want) {
						t.Fatalf("%s call %d: reply %q, want %q", a, seq, got, want)
					}
				}
			}
			// A repeat of the last number (its reply lost) is answered from
			// memory; the handler does not run again.
			got, err := client.Call(ctx, "w1", 3, []byte{99})
			if err != nil || !slices.Equal(got, []byte("w1:\x03")) {
				t.Fatalf("repeat: %q, %v; want the remembered reply", got, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, a := range []string{"w0", "w1"} {
				if !slices.Equal(ran[a], []uint64{1, 2, 3}) {
					t.Errorf("%s ran calls %v, want [1 2 3]", a, ran[a])
				}
			}
			if d, c := server.Stats().Duplicates, client.Stats().Duplicates; d != 1 || c != 1 {
				t.Errorf("Duplicates: actor %d, caller %d; want 1 each", d, c)
			}
		})
		t.Run("refuses numbers out of order and reports handler errors", func(t *testing.T) {
			server, client := callStream(t, w), callStream(t, w)
			var runs atomic.Int32
			serveActor(t, server, "a", func(_ context.Context, seq uint64, _ []byte) ([]byte, error) {
				runs.Add(1)
				if seq == 2 {
					return nil, errors.New("env exploded")
				}
				return nil, nil
			})
			ctx := ctxT(t, 10*time.Second)
			if _, err := client.Call(ctx, "a", 2, nil); !errors.Is(err, ErrRejected) {
				t.Fatalf("call 2 first: %v, want ErrRejected", err)
			}
			if _, err := client.Call(ctx, "a", 1, nil); err != nil {
				t.Fatal(err)
			}
			_, err := client.Call(ctx, "a", 2, nil)
			if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "env exploded") {
				t.Fatalf("failing call: %v, want ErrRejected with the handler's text", err)
			}
			if _, err := client.Call(ctx, "a", 2, nil); !errors.Is(err, ErrRejected) {
				t.Fatalf("repeat of the failed call: %v, want its remembered error", err)
			}
			if _, err := client.Call(ctx, "a", 0, nil); !errors.Is(err, ErrBadRequest) {
				t.Fatalf("call 0: %v, want ErrBadRequest", err)
			}
			if n := runs.Load(); n != 2 {
				t.Errorf("handler ran %d times, want 2", n)
			}
		})
		t.Run("a call waits for its actor to appear", func(t *testing.T) {
			server, client := callStream(t, w), callStream(t, w)
			ctx := ctxT(t, 10*time.Second)
			got := make(chan error, 1)
			go func() {
				_, err := client.Call(ctx, "late", 1, nil)
				got <- err
			}()
			serveActor(t, server, "late", func(context.Context, uint64, []byte) ([]byte, error) { return nil, nil })
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		})
		t.Run("closed", func(t *testing.T) {
			s := callStream(t, w)
			s.Close()
			if _, err := s.Call(ctxT(t, 5*time.Second), "a", 1, nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("Call after Close: %v", err)
			}
			if err := s.Serve(ctxT(t, 5*time.Second), "a", nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("Serve after Close: %v", err)
			}
		})
	})
}
