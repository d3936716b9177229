package flow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/nats-io/nats.go"

	"herd/algo"
	"herd/nn"
	"herd/sample"
	"herd/transport"
	"herd/weights"
)

// Workers over a transport (runtime.transport nats). The driver keeps one
// proxy per shard: a local Actor whose functions call the worker's actor
// over a transport.CallStream, one numbered call at a time, so the order
// of items and messages on the shard — the barrier GatherSync rests on —
// is the call order, and each call runs exactly once on the worker (a
// repeat after a lost reply is answered from its memory). The budget, the
// schedules' steps and ParForEach's functions stay on the driver's side;
// the worker only steps its envs (and, for Ape-X, prioritizes) on request:
//
//	call            request body               reply
//	segment         opSegment                  sample.Segment encoding
//	experience      opExperience, start (u64)  transitions + report episodes
//	weights         opWeights, safetensors     empty
//
// A worker holds the same state as an in-process one and draws from the
// same streams, so a synchronous plan gives the same bits on either
// transport (TestSyncPlanSameBitsAnyTransport).
const (
	opSegment byte = iota + 1
	opExperience
	opWeights
)

// remote is a run's carrier of worker calls: calls for the driver's
// proxies, host to serve a worker's actor (here: a goroutine of this
// process on its own connection), and what to close at the end.
type remote struct {
	calls   transport.CallStream
	host    func(actor string, h transport.CallHandler) (wait func())
	closers []func()
	counts  []func() transport.Stats

	likeOnce sync.Once
	like     []*nn.Param
	likeErr  error
}

// startNATS makes the run's remote over NATS: the server at url, or an
// embedded one on loopback when url is empty. The driver and the workers'
// hosts have a connection each.
func startNATS(ctx context.Context, r *Run, url string) (*remote, error) {
	rm := &remote{}
	ok := false
	defer func() {
		if !ok {
			rm.close()
		}
	}()
	if url == "" {
		srv, err := transport.StartServer(transport.ServerOptions{})
		if err != nil {
			return nil, err
		}
		rm.closers = append(rm.closers, srv.Shutdown)
		url = srv.URL()
	}
	stream := func(name string) (transport.CallStream, error) {
		nc, err := nats.Connect(url, nats.Name("herd flow "+name), nats.MaxReconnects(-1))
		if err != nil {
			return nil, fmt.Errorf("flow: connect to the NATS server: %w", err) // the URL may hold credentials
		}
		rm.closers = append(rm.closers, nc.Close)
		n, err := transport.NewNATS(nc)
		if err != nil {
			return nil, err
		}
		s, err := n.Calls(ctx, "flow", transport.Options{})
		if err != nil {
			return nil, err
		}
		rm.closers = append(rm.closers, func() { s.Close() })
		rm.counts = append(rm.counts, s.Stats)
		return s, nil
	}
	var err error
	if rm.calls, err = stream("driver"); err != nil {
		return nil, err
	}
	hosts, err := stream("workers")
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	rm.host = func(actor string, h transport.CallHandler) func() {
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			_ = hosts.Serve(r.Ctx, actor, h) // ends with the run's context or the stream
		}()
		return func() { <-done }
	}
	// Closers run last first: the hosts stop before the streams close.
	rm.closers = append(rm.closers, wg.Wait)
	ok = true
	return rm, nil
}

func (rm *remote) close() {
	for i := len(rm.closers) - 1; i >= 0; i-- {
		rm.closers[i]()
	}
}

// stats sums the counters of the driver's and the hosts' streams.
func (rm *remote) stats() transport.Stats {
	var st transport.Stats
	for _, s := range rm.counts {
		x := s()
		st.Duplicates += x.Duplicates
		st.Malformed += x.Malformed
		st.WrongProtocol += x.WrongProtocol
	}
	return st
}

// likeOf returns the parameters weights decode into: the learner's, built
// once from the pieces.
func (rm *remote) likeOf(pc *algo.Pieces) ([]*nn.Param, error) {
	rm.likeOnce.Do(func() {
		var v *weights.Version
		switch {
		case pc.NewSegmentLearner != nil:
			l, err := pc.NewSegmentLearner()
			if err != nil {
				rm.likeErr = err
				return
			}
			v = l.Weights()
			l.Close()
		case pc.NewTransitionLearner != nil:
			l, err := pc.NewTransitionLearner()
			if err != nil {
				rm.likeErr = err
				return
			}
			v = l.Weights()
			l.Close()
		default:
			rm.likeErr = fmt.Errorf("%w: the algorithm has no learner to decode weights for", ErrConfig)
			return
		}
		rm.like = make([]*nn.Param, v.Len())
		for i := range rm.like {
			rm.like[i] = v.Param(i)
		}
	})
	return rm.like, rm.likeErr
}

// proxy is the driver's end of one worker's actor: numbered calls, one at
// a time (it runs on the shard's driver-side Actor).
type proxy struct {
	r     *Run
	actor string
	seq   uint64
}

func (p *proxy) call(body []byte) ([]byte, error) {
	p.seq++
	b, err := p.r.remote.calls.Call(p.r.Ctx, p.actor, p.seq, body)
	if err != nil {
		return nil, fmt.Errorf("flow: %s: %w", p.actor, err)
	}
	return b, nil
}

// sendWeights sends v to the worker (one weights call).
func (p *proxy) sendWeights(enc *encodedWeights, v *weights.Version) error {
	body, err := enc.body(v)
	if err != nil {
		return err
	}
	_, err = p.call(body)
	return err
}

// actorName names worker k of a plan's worker set.
func actorName(set, k int) string { return fmt.Sprintf("set%d-worker%d", set, k) }

// encodedWeights is a weights call's body, encoded once per version and
// worker set.
type encodedWeights struct {
	mu sync.Mutex
	v  *weights.Version
	b  []byte
}

func (e *encodedWeights) body(v *weights.Version) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.v != v {
		b, err := v.Encode()
		if err != nil {
			return nil, err
		}
		e.v, e.b = v, append([]byte{opWeights}, b...)
	}
	return e.b, nil
}

// weightsCall applies a weights message on a worker.
func weightsCall(rm *remote, pc *algo.Pieces, body []byte, set func(*weights.Version)) error {
	like, err := rm.likeOf(pc)
	if err != nil {
		return err
	}
	v, err := weights.Decode(body, like)
	if err != nil {
		return err
	}
	set(v)
	return nil
}

// serve is an on-policy worker's handler: segments and weights.
func (w *worker) serve(rm *remote) transport.CallHandler {
	return func(_ context.Context, _ uint64, body []byte) ([]byte, error) {
		if len(body) == 0 {
			return nil, errors.New("flow: empty call")
		}
		switch body[0] {
		case opSegment:
			seg, err := w.produce()
			if err != nil {
				return nil, err
			}
			return seg.AppendEncode(nil)
		case opWeights:
			if err := weightsCall(rm, w.r.Pieces, body[1:], w.setWeights); err != nil {
				return nil, err
			}
			return nil, w.err
		}
		return nil, fmt.Errorf("flow: segment worker: unknown call %d", body[0])
	}
}

// serve is an off-policy worker's handler: experience and weights.
func (w *replayWorker) serve(rm *remote) transport.CallHandler {
	return func(_ context.Context, _ uint64, body []byte) ([]byte, error) {
		if len(body) == 0 {
			return nil, errors.New("flow: empty call")
		}
		switch body[0] {
		case opExperience:
			if len(body) != 9 {
				return nil, fmt.Errorf("flow: experience call of %d bytes, want 9", len(body))
			}
			x, err := w.produce(int64(binary.LittleEndian.Uint64(body[1:])))
			if err != nil {
				return nil, err
			}
			return appendExperience(nil, x)
		case opWeights:
			if err := weightsCall(rm, w.r.Pieces, body[1:], w.setWeights); err != nil {
				return nil, err
			}
			return nil, w.err
		}
		return nil, fmt.Errorf("flow: replay worker: unknown call %d", body[0])
	}
}

// appendExperience encodes x: its report's steps and episodes (return,
// length, at), then its transitions.
func appendExperience(dst []byte, x Experience) ([]byte, error) {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(x.Report.Steps))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(x.Report.Episodes)))
	for _, e := range x.Report.Episodes {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(e.Return))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Length))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.At))
	}
	return x.Transitions.AppendEncode(dst)
}

func decodeExperience(b []byte) (Experience, error) {
	bad := fmt.Errorf("%w: flow: experience reply of %d bytes", sample.ErrCorrupt, len(b))
	if len(b) < 12 {
		return Experience{}, bad
	}
	var x Experience
	x.Report.Steps = int64(binary.LittleEndian.Uint64(b))
	n := int(binary.LittleEndian.Uint32(b[8:]))
	b = b[12:]
	if n > len(b)/24 {
		return Experience{}, bad
	}
	for range n {
		x.Report.Episodes = append(x.Report.Episodes, sample.Episode{
			Return: math.Float64frombits(binary.LittleEndian.Uint64(b)),
			Length: int(binary.LittleEndian.Uint64(b[8:])), At: int(binary.LittleEndian.Uint64(b[16:]))})
		b = b[24:]
	}
	tr, err := sample.DecodeTransitions(b)
	if err != nil {
		return Experience{}, err
	}
	x.Transitions = tr
	return x, nil
}
