package flow_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/dqn"
	"herd/algo/impala"
	"herd/flow"
	"herd/sample"
	"herd/transport"
)

// killOnce is a worker's end of the run's calls that dies once: at its
// kill-th segment (or experience) call it makes the item (the worker's
// envs step), then stops serving and answers with an error instead — a
// worker killed after its work, before its reply. It records the init
// call of the start that serves after it.
type killOnce struct {
	transport.CallStream
	kill     int                // the segment call to die at (0: never)
	cancel   context.CancelFunc // stops this start's ServeWorker
	segments int
	inits    *[][]byte // every init call served, in order
	mu       *sync.Mutex
}

// opInit, opSegment, opExperience and opWeightsSegment are the first
// byte of the package's init, segment, experience and weights+segment
// calls (flow/remote.go).
const (
	opInit           = 1
	opSegment        = 2
	opExperience     = 3
	opWeightsSegment = 5
)

func (k *killOnce) Serve(ctx context.Context, actor string, h transport.CallHandler) error {
	return k.CallStream.Serve(ctx, actor, func(ctx context.Context, seq uint64, body []byte) ([]byte, error) {
		if len(body) > 0 && body[0] == opInit {
			k.mu.Lock()
			*k.inits = append(*k.inits, append([]byte(nil), body...))
			k.mu.Unlock()
		}
		b, err := h(ctx, seq, body)
		if len(body) > 0 && (body[0] == opSegment || body[0] == opExperience || body[0] == opWeightsSegment) {
			k.segments++
			if k.segments == k.kill {
				k.cancel()
				return nil, errors.New("killed")
			}
		}
		return b, err
	})
}

// TestServedWorkerRestarts: a worker served elsewhere dies mid-run and is
// started again (as herd launch's supervisor does). The driver rejoins the
// new start — init call with a new start number and the env steps the
// worker had taken, so its schedules continue and its seeds are its own — sends
// the lost call again, and the run reports every step of its budget once:
// one restart, one call reissued, no duplicates. For the synchronous A2C
// plan (GatherSync), the asynchronous IMPALA plan (GatherAsync 2) and the
// asynchronous Ape-X plan (replay workers, told their schedule step with
// each call), over the in-process call stream.
func TestServedWorkerRestarts(t *testing.T) {
	for _, c := range []struct {
		spec  algo.Spec
		file  string
		steps int64 // reported: the budget in whole rollouts of 4 × 8
		T     int64 // global env steps of one segment (a round of all 4 envs × 8 steps); 0: a replay worker
	}{
		{a2c.Spec(), "algo: a2c\nenv: CartPole-v1\nseed: 3\nsteps: 1300\nruntime: {executor: flow, env_workers: 2}\na2c: {num_envs: 4, num_steps: 8}\n", 1280, 32},
		{impala.Spec(), "algo: impala\nenv: CartPole-v1\nseed: 3\nsteps: 1300\nruntime: {executor: flow, env_workers: 2}\nimpala: {num_envs: 4, num_steps: 8, num_async: 2}\n", 1280, 32},
		{dqn.Spec(), "algo: dqn\nenv: CartPole-v1\nseed: 2\nsteps: 3000\nruntime: {executor: flow, env_workers: 2}\n" +
			"dqn: {learning_starts: 500, buffer_size: 2000, batch_size: 32, target_network_frequency: 100, net_arch: [32, 32], prioritized: true, initial_priorities: actor, n_steps: 3}\n", 3000, 0},
	} {
		t.Run(c.spec.Name, func(t *testing.T) {
			res := resolve(t, c.spec, c.file)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr := transport.NewInproc()
			calls := func() transport.CallStream {
				s, err := tr.Calls(ctx, "restart", transport.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			var mu sync.Mutex
			var inits [][]byte // worker 0's
			var wg sync.WaitGroup
			for k := range 2 {
				wg.Go(func() {
					// Start after start of worker k, as a supervisor would.
					for start := 1; ctx.Err() == nil; start++ {
						sctx, stop := context.WithCancel(ctx)
						s := &killOnce{CallStream: calls(), cancel: stop, inits: new([][]byte), mu: &mu}
						if k == 0 {
							s.inits = &inits
							if start == 1 {
								s.kill = 5
							}
						}
						if err := flow.ServeWorker(sctx, res.Header, res.Spec, res.Config, s, flow.ActorName(k)); err != nil {
							t.Errorf("worker %d, start %d: %v", k, start, err)
						}
						stop()
					}
				})
			}
			log := &countLog{}
			_, err := flow.TrainServed(ctx, &algo.Runtime{Header: res.Header, Log: log}, res.Spec, res.Config, calls(), nil)
			cancel()
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if log.steps != c.steps {
				t.Errorf("%d steps reported, want %d", log.steps, c.steps)
			}
			for name, want := range map[string]float64{"dist/restarts": 1, "dist/reissued": 1, "dist/duplicates": 0, "dist/decode_errors": 0} {
				if got, ok := log.scalars[name]; !ok || got != want {
					t.Errorf("%s = %v (logged %v), want %v", name, got, ok, want)
				}
			}
			if len(inits) != 2 {
				t.Fatalf("worker 0 served %d init calls, want 2 (its first start and its second)", len(inits))
			}
			// The init's tail: start number, then the global env step the
			// worker's schedules continue at (a rollout worker's; replay
			// workers are told theirs with each call).
			b := inits[1]
			inc, steps := binary.LittleEndian.Uint64(b[len(b)-16:]), int64(binary.LittleEndian.Uint64(b[len(b)-8:]))
			// The driver had received 4 items of the first start. The start
			// number is 2 unless an init call reached the dying start's loop
			// before it stopped and was refused (then the next attempt's, 3).
			if inc < 2 || steps != 4*c.T {
				t.Errorf("second start's init: start %d at env step %d, want start ≥ 2 at %d", inc, steps, 4*c.T)
			}
		})
	}
}

// mangled is a worker's end of the run's calls whose segment replies are
// broken on the way back: cut in half, or re-encoded with an env more.
type mangled struct {
	transport.CallStream
	cut bool
}

func (m *mangled) Serve(ctx context.Context, actor string, h transport.CallHandler) error {
	return m.CallStream.Serve(ctx, actor, func(ctx context.Context, seq uint64, body []byte) ([]byte, error) {
		b, err := h(ctx, seq, body)
		if err != nil || len(body) == 0 || (body[0] != opSegment && body[0] != opWeightsSegment) {
			return b, err
		}
		if m.cut {
			return b[:len(b)/2], nil
		}
		seg, err := sample.DecodeSegment(b[1:])
		if err != nil {
			return nil, err
		}
		wide := sample.NewSegment(seg.T, seg.N+1, seg.ObsDim, seg.ActDim)
		return wide.AppendEncode(b[:1])
	})
}

// TestMalformedSegmentReply: a worker whose segment reply is truncated or
// has another shape than the worker's envs ends the run with an error
// naming the worker, not a panic and not a learned segment.
func TestMalformedSegmentReply(t *testing.T) {
	for _, cut := range []bool{true, false} {
		res := resolve(t, a2c.Spec(), "algo: a2c\nenv: CartPole-v1\nsteps: 640\nruntime: {executor: flow, env_workers: 2}\na2c: {num_envs: 4, num_steps: 8}\n")
		ctx, cancel := context.WithCancel(context.Background())
		tr := transport.NewInproc()
		calls := func() transport.CallStream {
			s, err := tr.Calls(ctx, "mangled", transport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Go(func() {
				_ = flow.ServeWorker(ctx, res.Header, res.Spec, res.Config, &mangled{CallStream: calls(), cut: cut}, flow.ActorName(k))
			})
		}
		log := &countLog{}
		_, err := flow.TrainServed(ctx, &algo.Runtime{Header: res.Header, Log: log}, res.Spec, res.Config, calls(), nil)
		cancel()
		wg.Wait()
		if err == nil || !strings.Contains(err.Error(), "segment") || log.steps != 0 {
			t.Errorf("cut %v: %v after %d steps, want an error naming the segment before any", cut, err, log.steps)
		}
	}
}
