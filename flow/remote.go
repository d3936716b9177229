package flow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
//	call            request body                                      reply
//	init (first)    opInit, kind, the worker's shape, start, steps    status
//	segment         opSegment                                         status, sample.Segment encoding
//	experience      opExperience, start (u64)                         status, transitions + report episodes
//	weights         opWeights, safetensors                            status
//	weights+segment opWeightsSegment, safetensors                     status, sample.Segment encoding
//
// A rollout worker's new weights ride with its next segment call
// (weights+segment): one round trip per round instead of two, in the
// same order (the weights are set before the segment is made).
//
// Every reply begins with a status byte: replyOK, or replyErr followed by
// the worker's error (its envs or weights failed: the run fails). An error
// of the call itself — no answer within callDeadline, or a call number the
// actor refuses because it is a new start that has not been initialised —
// means the worker was lost; the proxy then rejoins (proxy.rejoin).
//
// The first call builds the worker, so whoever serves an actor needs only
// the run's config (ServeWorker). A worker holds the same state as an
// in-process one and draws from the same streams, so a synchronous plan
// gives the same bits on either transport
// (TestSyncPlanSameBitsForAnyWorkers) as long as no worker is restarted.
const (
	opInit byte = iota + 1
	opSegment
	opExperience
	opWeights
	opWeightsSegment
)

// Reply statuses.
const (
	replyOK byte = iota
	replyErr
)

// callDeadline bounds one call: a worker that has not answered by then is
// taken for lost (it hangs, or died and nothing started it again). It is
// long because a segment of a slow env can take minutes; a killed worker
// is noticed much sooner, by its new process's registration or its
// refusal of the call's resend (every 10 s, transport's callResend).
const callDeadline = 5 * time.Minute

// rejoinWait bounds the wait for a lost worker's next start to answer its
// init call (herd launch restarts a worker within about a second; an
// orchestrator may take longer). After it the run fails.
const rejoinWait = 2 * time.Minute

// Kinds of worker an init call builds.
const (
	kindRollout byte = iota + 1
	kindReplay
	kindReplaySlots
)

// workerInit is what an init call carries after the worker's kind: its
// sizes (rolloutInit's k, lo, hi, T, numEnvs or replayInit's k, numEnvs,
// stepsPerItem, w), γ (rollout workers), which start of the worker it is
// (inc, 1 for the first) and the env steps its schedules have seen
// (rollout workers; a replay worker is told its step with each item).
type workerInit struct {
	kind  byte
	x     [5]int
	gamma float32
	inc   uint64
	steps int64
}

// rolloutInit is the init call of on-policy worker k: envs lo…hi−1 of
// numEnvs, segments of T steps, γ for the truncation bootstrap; start inc,
// whose schedules continue at global env step steps.
func rolloutInit(k, lo, hi, T, numEnvs int, gamma float32, inc uint64, steps int64) []byte {
	b := []byte{opInit, kindRollout}
	for _, x := range []int{k, lo, hi, T, numEnvs} {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(gamma))
	b = binary.LittleEndian.AppendUint64(b, inc)
	return binary.LittleEndian.AppendUint64(b, uint64(steps))
}

// replayInit is the init call of off-policy worker k of w: numEnvs envs,
// stepsPerItem vector steps per item; start inc.
func replayInit(k, numEnvs, stepsPerItem, w int, inc uint64) []byte {
	b := []byte{opInit, kindReplay}
	for _, x := range []int{k, numEnvs, stepsPerItem, w} {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	b = binary.LittleEndian.AppendUint64(b, inc)
	return binary.LittleEndian.AppendUint64(b, 0)
}

// replaySlotsInit is the init call of slot worker k of w
// (OffPolicySlotWorkers): envs lo…hi−1, start inc.
func replaySlotsInit(k, lo, hi, w int, inc uint64) []byte {
	b := replayInit(k, lo, hi, w, inc)
	b[1] = kindReplaySlots
	return b
}

// streams returns the names of the random streams of a worker's start
// inc: the first start keeps the names an in-process worker uses (so a
// plan gives the same bits on either transport); a later start draws its
// actions and env seeds from streams of its own instead of replaying the
// first start's.
func streams(inc uint64) (actions, envs string) {
	if inc <= 1 {
		return "env-worker", "flow/env"
	}
	s := "/" + strconv.FormatUint(inc, 10)
	return "env-worker" + s, "flow/env" + s
}

// remote is a run's carrier of worker calls: calls for the driver's
// proxies, host to serve a worker's actor (here: a goroutine of this
// process on its own connection), and what to close at the end.
type remote struct {
	calls   transport.CallStream
	host    func(actor string) // nil: the actors are served elsewhere
	closers []func()
	counts  []func() transport.Stats
	// whoServes names the start serving an actor (TrainServed).
	whoServes func(ctx context.Context, actor string) (string, error)
	// restarts counts workers rejoined after a loss, reissued the calls
	// sent again to a worker's next start (the call in flight when it was
	// lost: its item never arrived, so none is learned twice).
	restarts, reissued atomic.Uint64
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
	rm.host = func(actor string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = serveHost(r.Ctx, r, hosts, actor) // ends with the run's context or the stream
		}()
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

// stats sums the counters of the driver's and the hosts' streams; the
// driver's stream alone counts the calls answered from a worker's memory
// (the hosts count the same calls again).
func (rm *remote) stats() transport.Stats {
	st := transport.Stats{Duplicates: rm.calls.Stats().Duplicates}
	for _, s := range rm.counts {
		x := s()
		st.Malformed += x.Malformed
		st.WrongProtocol += x.WrongProtocol
	}
	return st
}

// open starts serving actor (when the workers are hosted here) and returns
// the driver's proxy for it, after its init call (init(1)). The first
// start of a worker may take long (processes starting, an orchestrator
// scheduling them): the first init call waits within the run's context.
func (rm *remote) open(r *Run, actor string, init func(inc uint64) []byte) (*proxy, error) {
	if rm.host != nil {
		rm.host(actor)
	}
	p := &proxy{r: r, actor: actor, init: init, inc: 1}
	b, err := p.try(r.Ctx, init(1))
	if err != nil {
		return nil, err
	}
	if err := replyError(actor, b); err != nil {
		return nil, err
	}
	p.serving()
	return p, nil
}

// proxy is the driver's end of one worker's actor: numbered calls, one at
// a time (it runs on the shard's driver-side Actor).
type proxy struct {
	r     *Run
	actor string
	seq   uint64
	// inc is the worker's start the proxy talks to (1: the first); init
	// builds the init call of start inc with the worker's state now.
	inc  uint64
	init func(inc uint64) []byte
	// weights is the last weights call the worker answered (nil: it holds
	// the initial weights), sent again to its next start.
	weights []byte
	// who names the process serving the start (remote.whoServes; "":
	// unknown, then a lost worker is noticed by its next start's refusal).
	who string
}

// serving records who serves the worker's start just initialised; when
// that cannot be read, a lost worker is noticed by its next start's
// refusal instead.
func (p *proxy) serving() {
	p.who = ""
	if p.r.remote.whoServes != nil {
		p.who, _ = p.r.remote.whoServes(p.r.Ctx, p.actor)
	}
}

// lostError is a call that reached no live, initialised worker.
type lostError struct{ err error }

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// errReplaced ends a call whose worker another process serves now.
var errReplaced = errors.New("another process serves the worker now")

// whoEvery is how often a waiting call checks who serves its worker.
const whoEvery = time.Second

// try makes one call with the next number and returns the reply, status
// byte included. An error is a *lostError unless the run has ended.
func (p *proxy) try(ctx context.Context, body []byte) ([]byte, error) {
	p.seq++
	if p.who != "" {
		var stop context.CancelCauseFunc
		ctx, stop = context.WithCancelCause(ctx)
		defer stop(nil)
		who := p.who
		t := time.AfterFunc(whoEvery, func() { p.watch(ctx, who, stop) })
		defer t.Stop()
	}
	b, err := p.r.remote.calls.Call(ctx, p.actor, p.seq, body)
	switch {
	case err == nil && len(b) == 0:
		err = fmt.Errorf("%w: flow: %s: a reply without a status", transport.ErrMalformed, p.actor)
	case err == nil:
		return b, nil
	case p.r.Ctx.Err() != nil || errors.Is(err, transport.ErrClosed):
		return nil, fmt.Errorf("flow: %s: %w", p.actor, err)
	}
	if c := context.Cause(ctx); errors.Is(c, errReplaced) {
		err = c
	}
	return nil, &lostError{fmt.Errorf("flow: %s: %w", p.actor, err)}
}

// watch checks, every whoEvery until ctx ends, who serves the worker, and
// ends the call (stop) once another process than was does: the one that had the
// call was lost and started again. A worker merely unregistered (a
// keep-alive late on a busy machine) is not taken for lost.
func (p *proxy) watch(ctx context.Context, was string, stop context.CancelCauseFunc) {
	t := time.NewTicker(whoEvery)
	defer t.Stop()
	for {
		if who, err := p.r.remote.whoServes(ctx, p.actor); err == nil && who != "" && who != was {
			stop(fmt.Errorf("%w (%s, was %s)", errReplaced, who, was))
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// replyError returns the worker's error a reply carries, if any.
func replyError(actor string, b []byte) error {
	if b[0] == replyOK {
		return nil
	}
	return fmt.Errorf("flow: %s: %s", actor, b[1:])
}

// call makes one call and returns the reply's body. When the worker is
// lost, it rejoins the worker's next start and sends the call again there:
// the lost call's reply never arrived, so nothing it made is learned, and
// its env steps (claimed by the driver) are made by the next start.
func (p *proxy) call(body []byte) ([]byte, error) {
	for {
		ctx, cancel := context.WithTimeout(p.r.Ctx, callDeadline)
		b, err := p.try(ctx, body)
		cancel()
		var lost *lostError
		if errors.As(err, &lost) {
			if err := p.rejoin(lost); err != nil {
				return nil, err
			}
			p.r.remote.reissued.Add(1)
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := replyError(p.actor, b); err != nil {
			return nil, err
		}
		return b[1:], nil
	}
}

// rejoin waits for the next start of a lost worker (herd launch's
// supervisor restarts its process within the restart budget) and brings it
// to where the lost one was: an init call numbered 1 again (a new start's
// memory is empty) with the next start number, which gives it random
// streams of its own, and the steps its schedules had reached; then the
// last weights it was sent. A refused call (the lost start is still
// there) is retried with back-off; without an answer within rejoinWait
// the run fails.
func (p *proxy) rejoin(cause error) error {
	deadline := time.Now().Add(rejoinWait)
	for i := 0; ; i++ {
		p.inc++ // a number per attempt: an attempt that ran and was lost used its streams
		p.seq, p.who = 0, ""
		err := p.restore(deadline)
		var lost *lostError
		if !errors.As(err, &lost) {
			if err == nil {
				p.r.remote.restarts.Add(1)
			}
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("flow: %s was lost (%v) and no new start of it answered within %v: %w", p.actor, cause, rejoinWait, err)
		}
		t := time.NewTimer(min(50*time.Millisecond<<min(i, 5), time.Until(deadline)))
		select {
		case <-t.C:
		case <-p.r.Ctx.Done():
			t.Stop()
			return fmt.Errorf("flow: %s: %w", p.actor, p.r.Ctx.Err())
		}
	}
}

// restore makes a worker's next start p.inc: its init call, then the last
// weights.
func (p *proxy) restore(deadline time.Time) error {
	for i, body := range [][]byte{p.init(p.inc), p.weights} {
		if body == nil {
			continue
		}
		ctx, cancel := context.WithDeadline(p.r.Ctx, deadline)
		b, err := p.try(ctx, body)
		cancel()
		if err == nil {
			err = replyError(p.actor, b)
		}
		if err != nil {
			return err
		}
		if i == 0 {
			p.serving()
		}
	}
	return nil
}

// sendWeights sends v to the worker (one weights call).
func (p *proxy) sendWeights(enc *encodedWeights, v *weights.Version) error {
	body, err := enc.body(v)
	if err != nil {
		return err
	}
	if _, err = p.call(body); err == nil {
		p.weights = body
	}
	return err
}

// actorName names worker k of a plan's worker set.
func actorName(set, k int) string { return fmt.Sprintf("set%d-worker%d", set, k) }

// encodedWeights is a weights call's body, and a weights+segment call's,
// encoded once per version and worker set.
type encodedWeights struct {
	mu   sync.Mutex
	v    *weights.Version
	b, s []byte
}

func (e *encodedWeights) body(v *weights.Version) ([]byte, error) {
	b, _, err := e.bodies(v)
	return b, err
}

// bodies returns v's weights call and its weights+segment call.
func (e *encodedWeights) bodies(v *weights.Version) (w, ws []byte, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.v != v {
		b, err := v.Encode()
		if err != nil {
			return nil, nil, err
		}
		e.v, e.b, e.s = v, append([]byte{opWeights}, b...), append([]byte{opWeightsSegment}, b...)
	}
	return e.b, e.s, nil
}

// ServeWorker serves one worker of a plan over calls until ctx ends: the
// far end of a driver's proxy (runtime.transport nats), in a process of
// its own or on a goroutine. h, spec and cfg are the run's; actor is the
// name the driver calls (worker k of a plan's first worker set is
// "set0-worker<k>"). The worker is built by the driver's first call and
// closed when ServeWorker returns.
func ServeWorker(ctx context.Context, h algo.Header, spec algo.Spec, cfg algo.Config, calls transport.CallStream, actor string) error {
	if spec.Pieces == nil {
		return fmt.Errorf("%w: algorithm %s has no pieces", ErrConfig, spec.Name)
	}
	e, err := h.Envs.Make(h.Env)
	if err != nil {
		return err
	}
	sp := algo.SpacesOf(e)
	e.Close()
	pieces, err := spec.Pieces(h, cfg, sp)
	if err != nil {
		return err
	}
	return serveHost(ctx, &Run{Ctx: ctx, Header: h, Pieces: pieces, Spaces: sp}, calls, actor)
}

// ActorName is the name of worker k of a plan's first worker set, which
// ServeWorker serves for a driver whose workers run elsewhere.
func ActorName(k int) string { return actorName(0, k) }

// serveHost serves actor with a host built on r (the run's config).
func serveHost(ctx context.Context, r *Run, calls transport.CallStream, actor string) error {
	h := &host{r: r}
	defer h.close()
	return calls.Serve(ctx, actor, h.handle)
}

// host is a worker's end of its actor: the worker its init call built.
type host struct {
	r    *Run // the run's config (no budget: the driver claims)
	w    *worker
	rw   *replayWorker
	like []*nn.Param // what weights decode into
}

func (h *host) close() {
	if h.w != nil {
		h.w.close()
	}
	if h.rw != nil {
		h.rw.close()
	}
}

// handle answers one call: the reply's status, then its body. The
// worker's own failures travel in the reply (replyErr), so that the driver
// tells them from a lost worker.
func (h *host) handle(_ context.Context, _ uint64, body []byte) ([]byte, error) {
	b, err := h.answer(body)
	if err != nil {
		return append([]byte{replyErr}, err.Error()...), nil
	}
	return b, nil
}

func (h *host) answer(body []byte) ([]byte, error) {
	ok := []byte{replyOK}
	if len(body) == 0 {
		return nil, errors.New("flow: empty call")
	}
	op, body := body[0], body[1:]
	if op == opInit {
		return ok, h.init(body)
	}
	switch {
	case h.w == nil && h.rw == nil:
		return nil, fmt.Errorf("flow: call %d before the worker's init", op)
	case op == opSegment && h.w != nil:
		seg, err := h.w.produce()
		if err != nil {
			return nil, err
		}
		return seg.AppendEncode(ok)
	case op == opExperience && h.rw != nil && len(body) == 8:
		x, err := h.rw.produce(int64(binary.LittleEndian.Uint64(body)))
		if err != nil {
			return nil, err
		}
		return appendExperience(ok, x)
	case op == opWeightsSegment && h.w != nil:
		v, err := h.decodeWeights(body)
		if err != nil {
			return nil, err
		}
		if h.w.setWeights(v); h.w.err != nil {
			return nil, h.w.err
		}
		seg, err := h.w.produce()
		if err != nil {
			return nil, err
		}
		return seg.AppendEncode(ok)
	case op == opWeights:
		v, err := h.decodeWeights(body)
		if err != nil {
			return nil, err
		}
		if h.w != nil {
			h.w.setWeights(v)
			return ok, h.w.err
		}
		h.rw.setWeights(v)
		return ok, h.rw.err
	}
	return nil, fmt.Errorf("flow: call %d (%d bytes) is not for this worker", op, len(body))
}

// init builds the worker an init call describes.
func (h *host) init(b []byte) error {
	if h.w != nil || h.rw != nil {
		return errors.New("flow: worker initialised twice")
	}
	c, err := parseInit(b)
	if err != nil {
		return err
	}
	x := c.x
	if c.kind == kindRollout {
		w := &worker{id: x[0], lo: x[1], hi: x[2], T: x[3], total: x[4], gamma: c.gamma, r: h.r, inc: c.inc, steps: c.steps}
		h.w = w
		return w.init()
	}
	if c.kind == kindReplaySlots {
		w, err := newSlotReplayWorker(h.r, x[0], x[1], x[2], x[3], c.inc)
		h.rw = w
		return err
	}
	w, err := newReplayWorker(h.r, x[0], x[1], x[2], x[3], c.inc)
	h.rw = w
	return err
}

// parseInit reads an init call after its op byte (workerInit).
func parseInit(b []byte) (workerInit, error) {
	var c workerInit
	tail := len(b) - 16 // start and steps
	switch {
	case len(b) == 0:
		return c, errors.New("flow: init call without a worker kind")
	case len(b) == 41 && b[0] == kindRollout:
		c.gamma = math.Float32frombits(binary.LittleEndian.Uint32(b[21:]))
	case len(b) == 33 && (b[0] == kindReplay || b[0] == kindReplaySlots):
	default:
		return c, fmt.Errorf("flow: init call of %d bytes for worker kind %d", len(b)+1, b[0])
	}
	c.kind = b[0]
	sizes := 4
	if c.kind == kindRollout {
		sizes = 5
	}
	for i := range sizes {
		c.x[i] = int(binary.LittleEndian.Uint32(b[1+4*i:]))
	}
	if c.kind == kindRollout && !(0 <= c.x[1] && c.x[1] < c.x[2] && c.x[2] <= c.x[4]) {
		return c, fmt.Errorf("flow: init call for envs %d…%d of %d", c.x[1], c.x[2]-1, c.x[4])
	}
	c.inc = binary.LittleEndian.Uint64(b[tail:])
	c.steps = int64(binary.LittleEndian.Uint64(b[tail+8:]))
	if c.inc == 0 || c.steps < 0 {
		return c, fmt.Errorf("flow: init call of start %d at step %d", c.inc, c.steps)
	}
	return c, nil
}

// decodeWeights decodes a weights call into the learner's parameter
// shapes (built once from the pieces).
func (h *host) decodeWeights(b []byte) (*weights.Version, error) {
	if h.like == nil {
		pc := h.r.Pieces
		var v *weights.Version
		switch {
		case pc.NewSegmentLearner != nil:
			l, err := pc.NewSegmentLearner()
			if err != nil {
				return nil, err
			}
			v = l.Weights()
			l.Close()
		case pc.NewTransitionLearner != nil:
			l, err := pc.NewTransitionLearner()
			if err != nil {
				return nil, err
			}
			v = l.Weights()
			l.Close()
		default:
			return nil, fmt.Errorf("%w: the algorithm has no learner to decode weights for", ErrConfig)
		}
		h.like = make([]*nn.Param, v.Len())
		for i := range h.like {
			h.like[i] = v.Param(i)
		}
	}
	return weights.Decode(b, h.like)
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
