package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"herd/internal/scratch"
	herdv1 "herd/proto/herd/v1"
	"herd/sample"
	"herd/weights"
)

// NATS makes streams and services over one NATS connection. Subjects and
// buckets are named after the run, so runs sharing a server are separate:
//
//	herd.<run>.infer     inference requests (queue group "policy")
//	herd.<run>.samples   sample pushes (queue group "learners"); learner i > 0's: herd.<run>.samples.<i>
//	herd.<run>.gather    the learners' all-gather (Collective)
//	herd.<run>.actor.<a> calls to actor a (CallStream)
//	herd_<run>_params    object store: the latest weights version
//	herd_<run>_members   key-value bucket: registrations with per-key TTLs
type NATS struct {
	nc *nats.Conn
	js jetstream.JetStream
	// replicas of the JetStream buckets (0: the server's default, 1).
	replicas int
}

// SetReplicas sets how many servers of a cluster hold each of the run's
// JetStream buckets (config, params, members), for the buckets this NATS
// creates from now on. With 3 on a 3-node cluster the run survives the
// loss of any one node; with 1 the buckets live on one node only. Call it
// before making any stream or service.
func (n *NATS) SetReplicas(r int) { n.replicas = r }

// NewNATS wraps a connection; the caller keeps owning it and closes it
// after closing everything made here.
func NewNATS(nc *nats.Conn) (*NATS, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("dist: jetstream: %w", err)
	}
	return &NATS{nc: nc, js: js}, nil
}

// Conn returns the connection.
func (n *NATS) Conn() *nats.Conn { return n.nc }

// request sends data to subj and returns the reply, retrying with back-off
// while no subscriber is there (a policy worker or learner not started yet,
// or restarting) until ctx ends.
func (n *NATS) request(ctx context.Context, subj string, data []byte) (*nats.Msg, error) {
	return n.requestMsg(ctx, &nats.Msg{Subject: subj, Data: data})
}

// requestMsg is request for a message with headers.
func (n *NATS) requestMsg(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	for i := 0; ; i++ {
		m, err := n.nc.RequestMsgWithContext(ctx, msg)
		if errors.Is(err, nats.ErrMaxPayload) {
			// No retry can send it: a bad request, named with both sizes.
			return nil, fmt.Errorf("%w: a %s message of %d bytes (headers aside) is over the NATS server's max payload of %d bytes (max_payload in the server's config)",
				ErrBadRequest, msg.Subject, len(msg.Data), n.nc.MaxPayload())
		}
		if !errors.Is(err, nats.ErrNoResponders) {
			return m, err
		}
		if err := sleep(ctx, backoff(i)); err != nil {
			return nil, err
		}
	}
}

// sleep waits d or until ctx ends, and then returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscribe joins queue on subj and feeds messages to ch until the returned
// stop is called. The callback blocks while ch is full, so messages wait in
// the client with pending limits off: what waits is bounded by the number
// of callers, each with one request in flight.
func (n *NATS) subscribe(subj, queue string, ch chan *nats.Msg) (stop func(), err error) {
	return subscribeTo(n, subj, queue, ch, func(m *nats.Msg) *nats.Msg { return m })
}

// received is a message with the time it arrived.
type received struct {
	m  *nats.Msg
	at time.Time
}

// subscribeTo is subscribe feeding wrap(m) to ch.
func subscribeTo[T any](n *NATS, subj, queue string, ch chan T, wrap func(*nats.Msg) T) (stop func(), err error) {
	done := make(chan struct{})
	sub, err := n.nc.QueueSubscribe(subj, queue, func(m *nats.Msg) {
		select {
		case ch <- wrap(m):
		case <-done:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("dist: subscribe %s: %w", subj, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("dist: subscribe %s: %w", subj, err)
	}
	// Make the server know the subscription before callers act on it (a
	// learner that has joined gets the next push).
	if err := n.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("dist: subscribe %s: %w", subj, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = sub.Unsubscribe()
			close(done)
		})
	}, nil
}

// respond sends a reply, ignoring a requester that left.
func respond(m *nats.Msg, reply []byte) {
	if m.Reply != "" {
		_ = m.Respond(reply)
	}
}

// ---- inference ----

type natsInference struct {
	n      *NATS
	opt    Options
	subj   string
	closed chan struct{}
	once   sync.Once
	c      counters
}

// Inference returns the run's inference stream over NATS.
func (n *NATS) Inference(ctx context.Context, run string, opt Options) (InferenceStream, error) {
	opt = opt.withDefaults()
	if err := opt.checkDims(); err != nil {
		return nil, err
	}
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	return &natsInference{n: n, opt: opt, subj: "herd." + run + ".infer", closed: make(chan struct{})}, nil
}

func (s *natsInference) Infer(ctx context.Context, r *InferRequest) error {
	if err := s.opt.checkRequest(r); err != nil {
		return err
	}
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	req := &herdv1.InferRequest{Protocol: Protocol, Worker: int32(r.Worker),
		Rows: uint32(r.Rows), ObsDim: uint32(s.opt.ObsDim)}
	s.c.obsBytes.Add(uint64(packObs(req, r.Obs)))
	b, err := encode(req)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: s.subj, Data: b}
	if d, ok := ctx.Deadline(); ok {
		// How long the sender waits, so that a policy worker skips a
		// request whose sender has given up (relative, not a deadline:
		// the machines' clocks need not agree).
		msg.Header = nats.Header{waitHeader: []string{strconv.FormatInt(time.Until(d).Milliseconds(), 10)}}
	}
	m, err := s.n.requestMsg(ctx, msg)
	if err != nil {
		return fmt.Errorf("dist: infer: %w", err)
	}
	var rep herdv1.InferReply
	if err := decode(m.Data, &rep); err != nil {
		s.c.drop(s.opt.Logger, "infer reply", err)
		return err
	}
	if err := remoteError(rep.Error); err != nil {
		return err
	}
	if int(rep.Rows) != r.Rows || int(rep.OutDim) != s.opt.OutDim || len(rep.Out) != len(r.Out) {
		err := fmt.Errorf("%w: reply has %d rows × %d (%d floats), want %d × %d",
			ErrMalformed, rep.Rows, rep.OutDim, len(rep.Out), r.Rows, s.opt.OutDim)
		s.c.drop(s.opt.Logger, "infer reply", err)
		return err
	}
	copy(r.Out, rep.Out)
	r.WeightsVersion = rep.WeightsVersion
	return nil
}

// waitHeader carries how many milliseconds an inference request's sender
// waits for the answer.
const waitHeader = "Herd-Wait-Ms"

// abandoned tells whether r's sender has stopped waiting: it waited less
// than r has been here. Time in transit is not counted, so a request is
// skipped only when it is surely too late.
func abandoned(r received, now time.Time) bool {
	w := r.m.Header.Get(waitHeader)
	if w == "" {
		return false
	}
	ms, err := strconv.ParseInt(w, 10, 64)
	return err == nil && now.Sub(r.at) > time.Duration(ms)*time.Millisecond
}

func (s *natsInference) Serve(ctx context.Context, h BatchHandler) error {
	rch := make(chan received, 1024)
	unsub, err := subscribeTo(s.n, s.subj, "policy", rch, func(m *nats.Msg) received { return received{m, time.Now()} })
	if err != nil {
		return err
	}
	defer unsub()
	// next takes a waiting request whose sender still waits, if any.
	next := func() (received, bool) {
		for {
			select {
			case r := <-rch:
				if abandoned(r, time.Now()) {
					s.c.abandoned.Add(1)
					continue
				}
				return r, true
			default:
				return received{}, false
			}
		}
	}
	var (
		msgs  []*nats.Msg
		ats   []time.Time
		batch []*InferRequest
		pool  []*InferRequest
		bufs  [][]float32 // pool[i]'s decoded observations when they came packed
	)
	for {
		msgs, ats, batch = msgs[:0], ats[:0], batch[:0]
		select {
		case r := <-rch:
			if abandoned(r, time.Now()) {
				s.c.abandoned.Add(1)
				continue
			}
			msgs, ats = append(msgs, r.m), append(ats, r.at)
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return ErrClosed
		}
		rows := 0
		for i := 0; i < len(msgs); i++ {
			var req herdv1.InferRequest
			err := decode(msgs[i].Data, &req)
			if len(batch) == len(pool) {
				pool, bufs = append(pool, &InferRequest{}), append(bufs, nil)
			}
			var obs []float32
			if err == nil {
				obs, bufs[len(batch)], err = unpackObs(&req, s.opt.ObsDim, bufs[len(batch)])
			}
			if err != nil {
				s.c.drop(s.opt.Logger, "infer request", err)
				s.reply(msgs[i], &herdv1.InferReply{Protocol: Protocol, Error: err.Error()})
				msgs, ats = slices.Delete(msgs, i, i+1), slices.Delete(ats, i, i+1)
				i--
			} else {
				r := pool[len(batch)]
				r.Worker, r.Rows, r.Obs, r.Arrived = int(req.Worker), int(req.Rows), obs, ats[i]
				r.Out, r.WeightsVersion = scratch.Resize(r.Out, r.Rows*s.opt.OutDim), 0
				batch = append(batch, r)
				rows += r.Rows
			}
			if i == len(msgs)-1 && rows < s.opt.MaxBatchRows {
				// Take what else arrived while the last batch ran.
				if r, ok := next(); ok {
					msgs, ats = append(msgs, r.m), append(ats, r.at)
				}
			}
		}
		if len(batch) == 0 {
			continue
		}
		herr := h(ctx, batch)
		for i, r := range batch {
			rep := &herdv1.InferReply{Protocol: Protocol}
			if herr != nil {
				rep.Error = "policy worker: " + herr.Error()
			} else {
				rep.WeightsVersion, rep.Rows, rep.OutDim, rep.Out = r.WeightsVersion, uint32(r.Rows), uint32(s.opt.OutDim), r.Out
			}
			s.reply(msgs[i], rep)
			r.Obs = nil
		}
	}
}

// packObs puts obs into req in the smallest encoding that holds every
// value exactly (sample.EncodingOf, the sample stream's rule) and returns
// the observation bytes that takes.
func packObs(req *herdv1.InferRequest, obs []float32) int {
	enc := sample.EncodingOf(obs)
	if enc == sample.ObsFloat32 {
		req.Obs = obs
	} else {
		req.ObsEncoding = herdv1.ObsEncoding(enc)
		req.ObsPacked = sample.AppendObs(make([]byte, 0, sample.ObsBytes(len(obs), enc)), obs, enc)
	}
	return sample.ObsBytes(len(obs), enc)
}

// unpackObs checks req's shape against obsDim and returns its
// observations as floats: req.Obs itself, or the packed ones decoded into
// buf (grown as needed; returned for reuse).
func unpackObs(req *herdv1.InferRequest, obsDim int, buf []float32) ([]float32, []float32, error) {
	n := uint64(req.Rows) * uint64(req.ObsDim)
	enc := sample.ObsEncoding(req.ObsEncoding)
	bad := func() error {
		return fmt.Errorf("%w: request has %d rows × %d (%d floats, %d bytes in encoding %v), serving obs dim %d",
			ErrMalformed, req.Rows, req.ObsDim, len(req.Obs), len(req.ObsPacked), req.ObsEncoding, obsDim)
	}
	if req.Rows == 0 || int(req.ObsDim) != obsDim {
		return nil, buf, bad()
	}
	if enc == sample.ObsFloat32 {
		if uint64(len(req.Obs)) != n || len(req.ObsPacked) != 0 {
			return nil, buf, bad()
		}
		return req.Obs, buf, nil
	}
	// The packed length bounds what is allocated: at most 32 bytes of
	// floats a byte received.
	if len(req.Obs) != 0 || enc > sample.ObsBits || n > math.MaxInt32 || sample.ObsBytes(int(n), enc) != len(req.ObsPacked) {
		return nil, buf, bad()
	}
	buf = scratch.Resize(buf, int(n))
	if err := sample.DecodeObs(buf, req.ObsPacked, enc); err != nil {
		return nil, buf, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return buf, buf, nil
}

func (s *natsInference) reply(m *nats.Msg, rep *herdv1.InferReply) {
	b, err := encode(rep)
	if err != nil {
		s.opt.Logger.Error("dist: infer reply", "err", err)
		return
	}
	respond(m, b)
}

func (s *natsInference) Stats() Stats { return s.c.stats() }

func (s *natsInference) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// ---- samples ----

type natsSamples struct {
	n      *NATS
	opt    Options
	subj   string
	closed chan struct{}
	once   sync.Once
	c      counters

	mu     sync.Mutex
	unsub  func()         // set by the first Pull; guarded by mu
	q      chan queued    // queued samples of this learner (opt.Capacity)
	wg     sync.WaitGroup // the learner's receiving goroutine
	seen   *seenSamples   // ids queued here
	pulled *seenSamples   // ids Pull returned (MarshalDedup)

	heldMu    sync.Mutex
	held      map[SampleID]*heldPush // pushes with an id taken, not yet queued
	heldBytes int                    // their bytes, and those of pushes without an id
}

// heldPush is a push taken and not yet queued: the reply subject of its
// newest re-send, where its ack goes (an earlier requester has given up).
type heldPush struct{ reply string }

// queued is a sample in a learner's queue.
type queued struct {
	b  []byte
	id SampleID
}

// takenPush is a push handed from the subscription to the queueing
// goroutine.
type takenPush struct {
	m  *nats.Msg
	id SampleID
}

// Samples returns the run's sample stream over NATS. A learner's queue
// holds opt.Capacity samples; pushers to it block beyond that.
func (n *NATS) Samples(ctx context.Context, run string, opt Options) (SampleStream, error) {
	opt = opt.withDefaults()
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	if opt.Learner < 0 {
		return nil, fmt.Errorf("%w: learner %d", ErrBadRequest, opt.Learner)
	}
	return &natsSamples{n: n, opt: opt, subj: sampleSubject(run, opt.Learner), closed: make(chan struct{}),
		q: make(chan queued, opt.Capacity), seen: newSeenSamples(), pulled: newSeenSamples(), held: map[SampleID]*heldPush{}}, nil
}

func (s *natsSamples) Push(ctx context.Context, id SampleID, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty sample", ErrBadRequest)
	}
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	data, err := encode(&herdv1.SamplePush{Protocol: Protocol, Worker: int32(id.Slot), Sample: b})
	if err != nil {
		return err
	}
	// A push or its ack in flight on a server that dies is lost, and the
	// pusher would wait out its whole timeout (back-pressure included, so
	// long). Re-sending after pushResend bounds that stall; the id, the
	// same in every re-send and in the caller's own retries, lets the
	// learner ack a repeat of a push it has already queued without queueing
	// it twice.
	msg := &nats.Msg{Subject: s.subj, Data: data, Header: nats.Header{}}
	msg.Header.Set(sampleIDHeader, id.String())
	var m *nats.Msg
	for {
		rctx, cancel := context.WithTimeout(ctx, pushResend)
		m, err = s.n.requestMsg(rctx, msg)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("dist: push: %w", err)
		}
	}
	var ack herdv1.SampleAck
	if err := decode(m.Data, &ack); err != nil {
		s.c.drop(s.opt.Logger, "sample ack", err)
		return err
	}
	return remoteError(ack.Error)
}

// sampleIDHeader carries a push's SampleID.
const sampleIDHeader = "Herd-Sample-Id"

// pushResend is how long a push waits for its ack before it is sent again.
const pushResend = 5 * time.Second

// join subscribes this learner once: take holds each push (within
// opt.HeldBytes) for a goroutine that queues it (blocking while the queue
// is full, which holds back the pushers' acks) and acknowledges it once
// queued.
func (s *natsSamples) join() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsub != nil {
		return nil
	}
	ch := make(chan takenPush, maxTaken)
	sub, err := s.n.nc.QueueSubscribe(s.subj, "learners", func(m *nats.Msg) { s.take(m, ch) })
	if err == nil {
		// take never blocks: what waits is bounded by opt.HeldBytes here,
		// not by the client's pending limits.
		err = sub.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = s.n.nc.Flush() // the server knows the subscription: the next push reaches it
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return fmt.Errorf("dist: subscribe %s: %w", s.subj, err)
	}
	s.unsub = func() { _ = sub.Unsubscribe() }
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			var t takenPush
			select {
			case t = <-ch:
			case <-s.closed:
				return
			}
			if s.seen.seen(t.id) {
				s.c.duplicates.Add(1)
				s.release(t, "") // a repeat of a push already queued
				continue
			}
			var p herdv1.SamplePush
			err := decode(t.m.Data, &p)
			if err == nil && len(p.Sample) == 0 {
				err = fmt.Errorf("%w: empty sample", ErrMalformed)
			}
			if err != nil {
				s.c.drop(s.opt.Logger, "sample push", err)
				s.release(t, err.Error())
				continue
			}
			select {
			case s.q <- queued{b: p.Sample, id: t.id}:
				s.c.lost.Add(s.seen.add(t.id))
				s.release(t, "")
			case <-s.closed:
				return
			}
		}
	}()
	return nil
}

// maxTaken bounds the pushes held by count as well (each has at least one
// byte, so HeldBytes bounds them too, but not usefully).
const maxTaken = 1024

// take runs on the subscription's goroutine: it holds m for the queueing
// goroutine unless m re-sends a push held already (the ack goes to the
// re-send, the bytes are not held twice) or the pushes held reach
// opt.HeldBytes (m is refused unacknowledged, and re-sent by its pusher).
func (s *natsSamples) take(m *nats.Msg, ch chan<- takenPush) {
	var id SampleID
	if h := m.Header.Get(sampleIDHeader); h != "" {
		var err error
		if id, err = parseSampleID(h); err != nil {
			s.c.drop(s.opt.Logger, "sample push", err)
			s.ack(m, err.Error())
			return
		}
	}
	s.heldMu.Lock()
	if h := s.held[id]; h != nil && id.Seq > 0 {
		h.reply = m.Reply
		s.heldMu.Unlock()
		s.c.duplicates.Add(1)
		return
	}
	if s.heldBytes > 0 && (s.heldBytes+len(m.Data) > s.opt.HeldBytes || len(ch) == cap(ch)) {
		s.heldMu.Unlock()
		s.c.shed.Add(1)
		return
	}
	s.heldBytes += len(m.Data)
	if id.Seq > 0 {
		s.held[id] = &heldPush{reply: m.Reply}
	}
	s.heldMu.Unlock()
	ch <- takenPush{m: m, id: id} // never blocks: len(ch) < cap(ch) or nothing held
}

// release acknowledges a held push to its newest requester, and frees its
// bytes.
func (s *natsSamples) release(t takenPush, reason string) {
	s.heldMu.Lock()
	if h := s.held[t.id]; h != nil && t.id.Seq > 0 {
		t.m.Reply = h.reply
		delete(s.held, t.id)
	}
	s.heldBytes -= len(t.m.Data)
	s.heldMu.Unlock()
	s.ack(t.m, reason)
}

func (s *natsSamples) ack(m *nats.Msg, reason string) {
	if b, err := encode(&herdv1.SampleAck{Protocol: Protocol, Error: reason}); err == nil {
		respond(m, b)
	}
}

func (s *natsSamples) Pull(ctx context.Context) ([]byte, error) {
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	if err := s.join(); err != nil {
		return nil, err
	}
	select {
	case x := <-s.q:
		s.pulled.add(x.id)
		return x.b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return nil, ErrClosed
	}
}

// MarshalDedup saves the ids Pull returned (DedupWindow): a learner
// checkpointed between two Pulls has learned exactly those, where the
// ids queued include samples it has acknowledged and not pulled yet.
func (s *natsSamples) MarshalDedup() []byte { return s.pulled.marshal() }

// RestoreDedup restores a checkpoint's ids (DedupWindow) before the first
// Pull subscribes this learner.
func (s *natsSamples) RestoreDedup(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsub != nil {
		return fmt.Errorf("%w: the dedup window is restored before the first Pull", ErrBadRequest)
	}
	if err := s.seen.restore(b); err != nil {
		return err
	}
	return s.pulled.restore(b)
}

func (s *natsSamples) Stats() Stats {
	st := s.c.stats()
	st.Queued = uint64(len(s.q))
	return st
}

func (s *natsSamples) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.mu.Lock()
		if s.unsub != nil {
			s.unsub()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return nil
}

// ---- actor calls ----

type natsCalls struct {
	n      *NATS
	opt    Options
	prefix string
	closed chan struct{}
	once   sync.Once
	c      counters
}

// Calls returns the run's actor-call stream over NATS: request-reply on
// herd.<run>.actor.<actor>.
func (n *NATS) Calls(ctx context.Context, run string, opt Options) (CallStream, error) {
	opt = opt.withDefaults()
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	return &natsCalls{n: n, opt: opt, prefix: "herd." + run + ".actor.", closed: make(chan struct{})}, nil
}

// callResend is how long a call waits for its reply before it is sent
// again (same number: the actor answers a repeat from memory). A call
// whose handler runs longer is answered to its last send; the repeats it
// caused are counted as duplicates by the actor.
const callResend = 10 * time.Second

func (s *natsCalls) Call(ctx context.Context, actor string, seq uint64, body []byte) ([]byte, error) {
	if err := checkCall(actor, seq); err != nil {
		return nil, err
	}
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	data, err := encode(&herdv1.ActorCall{Protocol: Protocol, Seq: seq, Body: body})
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: s.prefix + actor, Data: data}
	var m *nats.Msg
	for {
		rctx, cancel := context.WithTimeout(ctx, callResend)
		m, err = s.n.requestMsg(rctx, msg)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("dist: call %s: %w", actor, err)
		}
	}
	var rep herdv1.ActorReply
	if err := decode(m.Data, &rep); err != nil {
		s.c.drop(s.opt.Logger, "actor reply", err)
		return nil, err
	}
	if rep.Seq != seq {
		err := fmt.Errorf("%w: reply to call %d answers call %d", ErrMalformed, seq, rep.Seq)
		s.c.drop(s.opt.Logger, "actor reply", err)
		return nil, err
	}
	if rep.Repeat {
		s.c.duplicates.Add(1)
	}
	return rep.Body, remoteError(rep.Error)
}

func (s *natsCalls) Serve(ctx context.Context, actor string, h CallHandler) error {
	if err := checkName("actor", actor); err != nil {
		return err
	}
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	ch := make(chan *nats.Msg, 4)
	unsub, err := s.n.subscribe(s.prefix+actor, "actor", ch)
	if err != nil {
		return err
	}
	defer unsub()
	var mem callMemory
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return ErrClosed
		}
		var call herdv1.ActorCall
		if err := decode(m.Data, &call); err != nil {
			s.c.drop(s.opt.Logger, "actor call", err)
			s.reply(m, &herdv1.ActorReply{Protocol: Protocol, Error: err.Error()})
			continue
		}
		body, errText, dup := mem.handle(ctx, call.Seq, call.Body, h)
		if dup {
			s.c.duplicates.Add(1)
		}
		s.reply(m, &herdv1.ActorReply{Protocol: Protocol, Seq: call.Seq, Body: body, Error: errText, Repeat: dup})
	}
}

func (s *natsCalls) reply(m *nats.Msg, rep *herdv1.ActorReply) {
	b, err := encode(rep)
	if err != nil {
		b, _ = encode(&herdv1.ActorReply{Protocol: Protocol, Seq: rep.Seq, Error: err.Error()})
	}
	if m.Reply == "" {
		return
	}
	if err := m.Respond(b); errors.Is(err, nats.ErrMaxPayload) {
		// Tell the caller rather than leave it resending; the actor's
		// memory still holds the reply.
		b, _ = encode(&herdv1.ActorReply{Protocol: Protocol, Seq: rep.Seq,
			Error: fmt.Sprintf("reply of %d bytes exceeds the server's max_payload: %v", len(b), err)})
		_ = m.Respond(b)
	}
}

func (s *natsCalls) Stats() Stats { return s.c.stats() }

func (s *natsCalls) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// ---- parameters ----

// paramsObject names the object holding version n. Each version is its own
// object, and the publisher deletes a version only once it has been
// superseded for fetchTimeout (see retire), so a reader fetching version n
// is not cut off by version n+1 replacing its chunks.
func paramsObject(n uint64) string { return "v-" + strconv.FormatUint(n, 10) }

// paramsVersion parses a name made by paramsObject.
func paramsVersion(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, "v-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// fetchTimeout bounds one weights download (nats.go's object reader waits
// for its deadline, not for a cancelled context).
const fetchTimeout = 2 * time.Second

// paramsKeepMax bounds the versions a publisher keeps in the store (at
// least the newest two are kept).
const paramsKeepMax = 32

// published is a version a publisher put and has not deleted yet.
type published struct {
	n  uint64
	at time.Time // when it was put
}

type natsParams struct {
	opt    Options
	nc     *nats.Conn
	subj   string // where versions are pushed
	sub    *nats.Subscription
	unpush sync.Once // unsubscribes sub when this instance first publishes
	// storeMu guards the store puts and the fields below (see storeEvery).
	storeMu    sync.Mutex
	stored     uint64      // 1 + the newest version put (0: none)
	pending    *pendingPut // pushed, not put yet
	storeTimer *time.Timer // puts pending after storeDelay
	deaf       atomic.Bool // sub unsubscribed: versions come from the store only
	obs        jetstream.ObjectStore
	box        *versionBox
	closed     chan struct{}
	cancel     context.CancelFunc
	once       sync.Once
	wg         sync.WaitGroup
	c          counters
	// kept are the versions this instance published and has not deleted,
	// oldest first; guarded by keptMu.
	keptMu sync.Mutex
	kept   []published
	// publishing is 1 + the newest version this instance is publishing (0:
	// none): its own watch skips that and older versions rather than
	// downloading what it already holds (the watch can see an object
	// before Publish returns).
	publishing atomic.Uint64
	// announced is the newest version number heard of, from the watch,
	// the store's listing or Publish.
	announced atomic.Uint64
}

// Params returns the run's parameter service: versions pushed on a plain
// subject, and kept in JetStream's object store (which chunks large
// weights) for readers that miss a push. Every instance takes the pushes,
// watches the store and decodes each new version with opt.Like; Latest is
// nil until one arrives.
func (n *NATS) Params(ctx context.Context, run string, opt Options) (ParamService, error) {
	opt = opt.withDefaults()
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	if len(opt.Like) == 0 {
		return nil, fmt.Errorf("%w: the NATS parameter service needs Options.Like", ErrBadRequest)
	}
	obs, err := n.paramsBucket(ctx, run)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := obs.Watch(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("dist: params watch: %w", err)
	}
	p := &natsParams{opt: opt, nc: n.nc, subj: "herd." + run + ".params", obs: obs, box: newVersionBox(), closed: make(chan struct{}), cancel: cancel}
	// Each version also goes out on a plain subject, ahead of its store
	// put: taking it from there costs a reader one delivered message, where
	// a store fetch costs a JetStream consumer created and deleted (four
	// API requests, their JSON on both sides); on PPO CartPole under herd
	// launch the fetches were a quarter of the NATS server's CPU. The store
	// stays the record for readers that join late or miss a push.
	sub, err := n.nc.Subscribe(p.subj, p.pushed)
	if err != nil {
		_ = w.Stop()
		cancel()
		return nil, fmt.Errorf("dist: params subscribe: %w", err)
	}
	p.sub = sub
	// Best effort: once the server has the subscription, every push from
	// here on reaches this instance (a miss costs a store fetch).
	_ = n.nc.FlushTimeout(fetchTimeout)
	// A watch can stop announcing versions without closing (its consumer
	// lost while a node was down) or close for good; a holder left on old
	// weights then makes every sample too old to learn, and the learner
	// publishes nothing new. So when no announcement came for paramsPoll,
	// the store is listed and its newest version fetched.
	poll := time.NewTicker(paramsPoll)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer poll.Stop()
		defer func() { _ = w.Stop() }()
		updates := w.Updates()
		heard := time.Now()
		for {
			select {
			case <-poll.C:
				if time.Since(heard) < paramsPoll {
					continue
				}
				heard = time.Now()
				p.pollNewest(wctx)
			case info, ok := <-updates:
				if !ok {
					updates = nil // polled from now on
					continue
				}
				heard = time.Now()
				// Fetch only the newest version announced so far: a reader
				// slower than the publisher would otherwise download every
				// version in turn and fall ever further behind.
				name, n, ok := p.newest(info, 0)
				for more := true; more && ok; {
					select {
					case next, open := <-updates:
						if !open {
							more = false
						} else if nm, nn, nok := p.newest(next, n); nok {
							name, n = nm, nn
						}
					default:
						more = false
					}
				}
				if !ok {
					continue
				}
				p.announce(n)
				if p.wants(n) && !p.awaitPush(wctx, n) {
					p.fetch(wctx, name, n)
				}
			case <-wctx.Done():
				return
			}
		}
	}()
	return p, nil
}

// paramsPoll is how long a parameter service waits for an announcement
// before it lists the store itself.
const paramsPoll = 2 * time.Second

// pollNewest lists the store and fetches its newest version when it is
// newer than the one held.
func (p *natsParams) pollNewest(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	infos, err := p.obs.List(lctx)
	cancel()
	if err != nil {
		return // no objects yet, or the servers unreachable: the next poll
	}
	var name string
	var n uint64
	for _, info := range infos {
		if nm, nn, ok := p.newest(info, n); ok {
			name, n = nm, nn
		}
	}
	if name == "" {
		return
	}
	p.announce(n)
	if p.wants(n) {
		p.fetch(ctx, name, n)
	}
}

// pushGrace is how long a reader told of version n by the store's watch
// waits for n's push before fetching n from the store. The push leaves
// before the store put, so it is late only when lost (a slow consumer,
// a reconnect) or under heavy load; a late one costs a fetch, not weights.
const pushGrace = 100 * time.Millisecond

// wants reports whether version n is newer than the one held and not one
// this instance is publishing itself.
func (p *natsParams) wants(n uint64) bool {
	cur := p.box.cur.Load()
	return (cur == nil || n > cur.N) && n+1 > p.publishing.Load()
}

// awaitPush waits up to pushGrace for version n (or a newer one) to arrive
// by push, and reports whether it did.
func (p *natsParams) awaitPush(ctx context.Context, n uint64) bool {
	if p.deaf.Load() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, pushGrace)
	defer cancel()
	_, err := p.box.wait(ctx, n, p.closed)
	return err == nil
}

// pushed takes a version from the params subject: its header names the
// version, so one not newer than the held one is skipped undecoded.
func (p *natsParams) pushed(m *nats.Msg) {
	n, err := strconv.ParseUint(m.Header.Get(paramsVersionHeader), 10, 64)
	if err != nil {
		p.c.drop(p.opt.Logger, "params", fmt.Errorf("%w: params push without a version: %w", ErrMalformed, err))
		return
	}
	p.announce(n)
	// A reader behind the publisher decodes only the newest of the pushes
	// queued for it (the count includes this one while it is handled).
	if q, _, err := m.Sub.Pending(); err == nil && q > 1 {
		return
	}
	if p.wants(n) {
		p.keep(m.Data, "push", n)
	}
}

// paramsVersionHeader carries a pushed version's number.
const paramsVersionHeader = "Herd-Weights-Version"

// announce notes that version n exists.
func (p *natsParams) announce(n uint64) {
	for {
		a := p.announced.Load()
		if n <= a || p.announced.CompareAndSwap(a, n) {
			return
		}
	}
}

// newest returns info's object and version when it announces a version
// above floor (counting a malformed name).
func (p *natsParams) newest(info *jetstream.ObjectInfo, floor uint64) (string, uint64, bool) {
	if info == nil || info.Deleted {
		return "", 0, false
	}
	n, ok := paramsVersion(info.Name)
	if !ok {
		p.c.drop(p.opt.Logger, "params", fmt.Errorf("%w: object %q", ErrMalformed, info.Name))
		return "", 0, false
	}
	if floor > 0 && n <= floor {
		return "", 0, false
	}
	return info.Name, n, true
}

// fetch reads version n from object name and keeps it if it is newer.
func (p *natsParams) fetch(ctx context.Context, name string, n uint64) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	b, err := p.obs.GetBytes(ctx, name)
	if err != nil {
		// Not found: the publisher already replaced it by a newer version,
		// whose own announcement follows. Otherwise this holder stays on
		// older weights until the next version: counted and logged.
		select {
		case <-p.closed:
			return
		default:
		}
		if !errors.Is(err, jetstream.ErrObjectNotFound) {
			p.c.fetchFailed.Add(1)
			p.opt.Logger.Warn("dist: params fetch failed; acting on older weights until the next version", "version", n, "err", err)
		}
		return
	}
	p.keep(b, "object "+name, n)
}

// keep decodes b, an encoded herdv1.Params said (by from) to hold version
// n, and keeps it if it is newer than the held one.
func (p *natsParams) keep(b []byte, from string, n uint64) {
	var m herdv1.Params
	if err := decode(b, &m); err != nil {
		p.c.drop(p.opt.Logger, "params", err)
		return
	}
	v, err := weights.Decode(m.Safetensors, p.opt.Like)
	if err == nil && (v.N != m.WeightsVersion || v.N != n) {
		err = fmt.Errorf("%w: %s, version %d, envelope version %d, safetensors version %d", ErrMalformed, from, n, m.WeightsVersion, v.N)
	}
	if err != nil {
		p.c.drop(p.opt.Logger, "params", fmt.Errorf("%w: %w", ErrMalformed, err))
		return
	}
	p.box.offer(v)
}

func (p *natsParams) Publish(ctx context.Context, v *weights.Version) error {
	select {
	case <-p.closed:
		return ErrClosed
	default:
	}
	if err := p.box.check(v); err != nil {
		return err
	}
	st, err := v.Encode()
	if err != nil {
		return err
	}
	b, err := encode(&herdv1.Params{Protocol: Protocol, WeightsVersion: v.N, Safetensors: st})
	if err != nil {
		return err
	}
	p.publishing.Store(v.N + 1)
	// A publisher holds its versions already: its copy of each push
	// would be wire bytes and a wake-up for nothing.
	p.unpush.Do(func() {
		p.deaf.Store(true)
		_ = p.sub.Unsubscribe()
	})
	// The push is best effort (the store put below is the record), and is
	// skipped for weights above the server's message size: those readers
	// fetch from the store.
	pushed := len(b)+64 <= int(p.nc.MaxPayload())
	if pushed {
		msg := &nats.Msg{Subject: p.subj, Data: b, Header: nats.Header{}}
		msg.Header.Set(paramsVersionHeader, strconv.FormatUint(v.N, 10))
		_ = p.nc.PublishMsg(msg)
	}
	p.storeMu.Lock()
	defer p.storeMu.Unlock()
	if pushed && p.stored > 0 && v.N < p.stored-1+storeEvery {
		// Pushed: the store may trail by a few versions, and gets this one
		// if no newer version comes within storeDelay.
		p.pending = &pendingPut{n: v.N, b: b}
		if p.storeTimer == nil {
			p.storeTimer = time.AfterFunc(storeDelay, p.storePending)
		} else {
			p.storeTimer.Reset(storeDelay)
		}
		p.box.offer(v)
		return nil
	}
	if err := p.put(ctx, v.N, b); err != nil {
		return err
	}
	p.box.offer(v)
	return nil
}

// storeEvery and storeDelay bound how far the store trails the pushes: a
// pushed version is put when it is storeEvery versions past the last one
// put, or when no newer version followed it within storeDelay. Each put
// costs the publisher and the server a dozen JetStream requests and acks
// (chunk, meta, the superseded version's delete), and readers take pushes;
// the store serves readers that join late or lose a push, which then act
// on a version at most storeEvery behind until the next push, and always
// find the newest version there once the publisher pauses.
const (
	storeEvery = 8
	storeDelay = 50 * time.Millisecond
)

// pendingPut is a pushed version not put in the store yet.
type pendingPut struct {
	n uint64
	b []byte
}

// put stores version n (encoded b) and retires superseded versions;
// storeMu held.
func (p *natsParams) put(ctx context.Context, n uint64, b []byte) error {
	// A node lost mid-run leaves the bucket without a stream leader until
	// the survivors elect one: retry through it rather than end the learner.
	if err := retryJS(ctx, publishAttempt, func(ctx context.Context) error {
		_, err := p.obs.PutBytes(ctx, paramsObject(n), b)
		return err
	}); err != nil {
		return fmt.Errorf("dist: publish version %d: %w", n, err)
	}
	p.stored = n + 1
	p.pending = nil
	p.retire(ctx, n, time.Now())
	return nil
}

// storePending puts the pending version, if any (storeTimer's function,
// and Close's).
func (p *natsParams) storePending() {
	p.storeMu.Lock()
	defer p.storeMu.Unlock()
	if p.pending == nil {
		return
	}
	if !p.nc.IsConnected() {
		// Readers waiting for this version (a push lost in the outage)
		// need it stored: try again later, unless closing.
		select {
		case <-p.closed:
		default:
			p.storeTimer.Reset(storeDelay)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	if err := p.put(ctx, p.pending.n, p.pending.b); err != nil {
		p.opt.Logger.Warn("dist: storing pushed weights failed; late readers wait for the next version", "version", p.pending.n, "err", err)
	}
}

// retire records version n, put at now, and deletes the versions that
// have been superseded for longer than fetchTimeout, or beyond the newest
// paramsKeepMax, always keeping the newest two. Readers take the newest
// version announced, so a fetch begins while its version is the newest or
// the one before; keeping each for a fetch's timeout after its successor
// came means no fetch that could succeed in time loses its object. Deleting
// n−2 at once instead starved readers under load: with PPO publishing 50
// versions a second, a download slower than two of them (one took 2 s on
// a loaded 2-core machine) found its version gone, again and again, and
// left its holder acting on weights 32 versions old. A version left by an
// earlier incarnation of the publisher stays until the bucket is removed.
func (p *natsParams) retire(ctx context.Context, n uint64, now time.Time) {
	p.keptMu.Lock()
	p.kept = append(p.kept, published{n: n, at: now})
	var drop []uint64
	for len(p.kept) > 2 && (len(p.kept) > paramsKeepMax || now.Sub(p.kept[1].at) > fetchTimeout) {
		drop = append(drop, p.kept[0].n)
		p.kept = p.kept[1:]
	}
	p.keptMu.Unlock()
	for _, d := range drop {
		if err := p.obs.Delete(ctx, paramsObject(d)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			p.opt.Logger.Warn("dist: delete old weights", "version", d, "err", err)
		}
	}
}

// AboveHeld lists the store (HeldBound). A publisher pushes a version
// before it puts it and puts at least every storeEvery versions, so a
// reader may hold up to storeEvery versions past the newest stored.
func (p *natsParams) AboveHeld(ctx context.Context) (uint64, error) {
	var newest uint64
	found := false
	err := retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		infos, err := p.obs.List(ctx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, info := range infos {
			if n, ok := paramsVersion(info.Name); ok && !info.Deleted {
				newest, found = max(newest, n), true
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("dist: list the weights versions: %w", err)
	}
	if !found {
		return 0, nil
	}
	return max(newest, p.Announced()) + storeEvery + 1, nil
}

func (p *natsParams) Latest() *weights.Version { return p.box.cur.Load() }

func (p *natsParams) Announced() uint64 {
	a := p.announced.Load()
	if v := p.box.cur.Load(); v != nil && v.N > a {
		return v.N
	}
	return a
}

func (p *natsParams) Wait(ctx context.Context, n uint64) (*weights.Version, error) {
	return p.box.wait(ctx, n, p.closed)
}

func (p *natsParams) Stats() Stats { return p.c.stats() }

func (p *natsParams) Close() error {
	p.once.Do(func() {
		close(p.closed)
		p.unpush.Do(func() { _ = p.sub.Unsubscribe() })
		p.storeMu.Lock()
		if p.storeTimer != nil {
			p.storeTimer.Stop()
		}
		p.storeMu.Unlock()
		p.storePending()
		p.cancel()
		p.wg.Wait()
	})
	return nil
}

// ---- membership ----

type natsMembership struct {
	n      *NATS
	opt    Options
	kv     jetstream.KeyValue
	cfg    jetstream.KeyValue // the run's config bucket: progress records
	subj   string             // the bucket's subject prefix, "$KV.<bucket>."
	ttl    time.Duration
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	c      counters
}

// Membership returns the run's name service over a JetStream key-value
// bucket whose entries carry per-message TTLs: each keep-alive re-puts the
// key with the TTL, and when one is missed for a TTL the server removes
// the key and leaves a delete marker that watchers see.
func (n *NATS) Membership(ctx context.Context, run string, opt Options) (Membership, error) {
	opt = opt.withDefaults()
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	ttl := time.Duration(math.Ceil(opt.TTL.Seconds())) * time.Second
	bucket := "herd_" + run + "_members"
	kv, err := n.kvBucket(ctx, "members", jetstream.KeyValueConfig{Bucket: bucket, LimitMarkerTTL: ttl, Replicas: n.replicas})
	if err != nil {
		return nil, err
	}
	cfg, err := n.configBucket(ctx, run)
	if err != nil {
		return nil, err
	}
	return &natsMembership{n: n, opt: opt, kv: kv, cfg: cfg, subj: "$KV." + bucket + ".", ttl: ttl, closed: make(chan struct{})}, nil
}

func (m *natsMembership) put(ctx context.Context, name string, rec []byte) error {
	_, err := m.n.js.Publish(ctx, m.subj+name, rec, jetstream.WithMsgTTL(m.ttl))
	return err
}

func (m *natsMembership) Register(ctx context.Context, name string, info []byte) (Lease, error) {
	if err := checkName("member name", name); err != nil {
		return nil, err
	}
	select {
	case <-m.closed:
		return nil, ErrClosed
	default:
	}
	rec, err := encode(&herdv1.MemberRecord{Protocol: Protocol, Name: name, Info: info})
	if err != nil {
		return nil, err
	}
	if err := retryJS(ctx, publishAttempt, func(ctx context.Context) error { return m.put(ctx, name, rec) }); err != nil {
		return nil, fmt.Errorf("dist: register %s: %w", name, err)
	}
	op := func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), m.ttl) }
	return startKeepAlive(ctx, m.closed, &m.wg, m.ttl,
		func() error { c, cancel := op(); defer cancel(); return m.put(c, name, rec) },
		func() error {
			// Retried while the bucket has no leader (a node lost): the
			// deletion tells the others at once, where the TTL would
			// take its whole length.
			c, cancel := op()
			defer cancel()
			return retryJS(c, publishAttempt, func(ctx context.Context) error { return m.kv.Delete(ctx, name) })
		}), nil
}

func (m *natsMembership) Members(ctx context.Context) ([]Member, error) {
	// Listing the keys runs a consumer, which times out while a cluster
	// that just started (or lost a node) has no leader for the bucket.
	var keys []string
	err := retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		var err error
		keys, err = m.kv.Keys(ctx)
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			keys, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dist: members: %w", err)
	}
	out := make([]Member, 0, len(keys))
	for _, k := range keys {
		e, err := m.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired between the listing and now
		}
		if err != nil {
			return nil, fmt.Errorf("dist: member %s: %w", k, err)
		}
		var rec herdv1.MemberRecord
		if err := decode(e.Value(), &rec); err != nil {
			m.c.drop(m.opt.Logger, "member "+k, err)
			continue
		}
		out = append(out, Member{Name: k, Info: rec.Info})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func (m *natsMembership) Gone(ctx context.Context, name string) (<-chan struct{}, error) {
	if err := checkName("member name", name); err != nil {
		return nil, err
	}
	w, err := m.kv.Watch(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("dist: watch %s: %w", name, err)
	}
	ch := make(chan struct{})
	// A watch can miss the removal: its consumer may fail for good while
	// this process is cut off from the servers (a partition), and the
	// updates then stop without one. So the key is also looked up once
	// per TTL, which sees a removal however it happened.
	poll := time.NewTicker(max(m.ttl, time.Second))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer poll.Stop()
		defer func() { _ = w.Stop() }()
		updates := w.Updates()
		alive := false
		for {
			select {
			case <-poll.C:
				_, err := m.kv.Get(ctx, name)
				if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
					close(ch)
					return
				}
			case e, ok := <-updates:
				if !ok {
					updates = nil // polled from now on
					continue
				}
				switch {
				case e == nil: // the initial values are done
					if !alive {
						close(ch)
						return
					}
				case e.Operation() == jetstream.KeyValuePut:
					alive = true
				default: // delete, purge, or a TTL's delete marker
					close(ch)
					return
				}
			case <-ctx.Done():
				return
			case <-m.closed:
				return
			}
		}
	}()
	return ch, nil
}

// progressKey names a worker's progress record in the config bucket.
func progressKey(name string) string { return "progress." + name }

func (m *natsMembership) Resume(ctx context.Context, name string) (Progress, error) {
	if err := checkName("member name", name); err != nil {
		return Progress{}, err
	}
	var p Progress
	// Compare-and-set on the key's revision, so that two starts racing
	// (an orchestrator that started a replacement too early) still get
	// different incarnations.
	err := retryJS(ctx, publishAttempt, func(ctx context.Context) error {
		for {
			e, err := m.cfg.Get(ctx, progressKey(name))
			var rev uint64
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				p = Progress{}
			case err != nil:
				return err
			default:
				if p, err = decodeProgress(e.Value()); err != nil {
					return err
				}
				rev = e.Revision()
			}
			p.Incarnation++
			b, err := encodeProgress(p)
			if err != nil {
				return err
			}
			if rev == 0 {
				_, err = m.cfg.Create(ctx, progressKey(name), b)
			} else {
				_, err = m.cfg.Update(ctx, progressKey(name), b, rev)
			}
			if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
				continue // another start won; read again
			}
			return err
		}
	})
	if err != nil {
		return Progress{}, fmt.Errorf("dist: resume %s: %w", name, err)
	}
	return p, nil
}

// isWrongSequence tells a compare-and-set that lost (the key changed).
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

func (m *natsMembership) Save(ctx context.Context, name string, p Progress) error {
	if err := checkName("member name", name); err != nil {
		return err
	}
	b, err := encodeProgress(p)
	if err != nil {
		return err
	}
	if _, err := m.cfg.Put(ctx, progressKey(name), b); err != nil {
		return fmt.Errorf("dist: save %s's progress: %w", name, err)
	}
	return nil
}

func (m *natsMembership) Progress(ctx context.Context) (map[string]Progress, error) {
	keys, err := m.cfg.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return map[string]Progress{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dist: progress: %w", err)
	}
	out := map[string]Progress{}
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, "progress.")
		if !ok {
			continue
		}
		e, err := m.cfg.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dist: progress of %s: %w", name, err)
		}
		p, err := decodeProgress(e.Value())
		if err != nil {
			m.c.drop(m.opt.Logger, "progress "+name, err)
			continue
		}
		out[name] = p
	}
	return out, nil
}

func encodeProgress(p Progress) ([]byte, error) {
	return encode(&herdv1.WorkerProgress{Protocol: Protocol, Incarnation: p.Incarnation, Seq: p.Seq, Steps: p.Steps,
		FetchFailed: p.FetchFailed, Abandoned: p.Abandoned, Batches: p.Batches, BatchRows: p.BatchRows,
		BatchRowsP50: p.BatchRowsP50, BatchRowsP99: p.BatchRowsP99, LatencyP50Us: p.LatencyP50us, LatencyP99Us: p.LatencyP99us,
		InferObsBytes: p.InferObsBytes})
}

func decodeProgress(b []byte) (Progress, error) {
	var m herdv1.WorkerProgress
	if err := decode(b, &m); err != nil {
		return Progress{}, err
	}
	return Progress{Incarnation: m.Incarnation, Seq: m.Seq, Steps: m.Steps, FetchFailed: m.FetchFailed, Abandoned: m.Abandoned,
		Batches: m.Batches, BatchRows: m.BatchRows, BatchRowsP50: m.BatchRowsP50, BatchRowsP99: m.BatchRowsP99,
		LatencyP50us: m.LatencyP50Us, LatencyP99us: m.LatencyP99Us, InferObsBytes: m.InferObsBytes}, nil
}

func (m *natsMembership) Stats() Stats { return m.c.stats() }

func (m *natsMembership) Close() error {
	m.once.Do(func() { close(m.closed) })
	m.wg.Wait()
	return nil
}

// ---- run config ----

// PutRunConfig stores the run's resolved config (bytes of config.yaml) for
// workers that join with only a NATS URL and a run ID.
func (n *NATS) PutRunConfig(ctx context.Context, run string, cfg []byte) error {
	kv, err := n.configBucket(ctx, run)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, "config", cfg); err != nil {
		return fmt.Errorf("dist: put run config: %w", err)
	}
	return nil
}

// RunConfig returns the run's config, waiting (until ctx ends) for the
// controller to store it.
func (n *NATS) RunConfig(ctx context.Context, run string) ([]byte, error) {
	kv, err := n.configBucket(ctx, run)
	if err != nil {
		return nil, err
	}
	w, err := kv.Watch(ctx, "config")
	if err != nil {
		return nil, fmt.Errorf("dist: watch run config: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("dist: run config watch ended")
			}
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				return e.Value(), nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("dist: waiting for run %s's config: %w", run, ctx.Err())
		}
	}
}

// ResetRun removes what an earlier run of the same ID left in its config
// bucket (its end mark and its workers' progress), so that a new run's
// workers start afresh. The controller calls it before PutRunConfig.
func (n *NATS) ResetRun(ctx context.Context, run string) error {
	kv, err := n.configBucket(ctx, run)
	if err != nil {
		return err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dist: reset run %s: %w", run, err)
	}
	for _, k := range keys {
		if k == "end" || k == "stop" || strings.HasPrefix(k, "progress.") {
			if err := kv.Delete(ctx, k); err != nil {
				return fmt.Errorf("dist: reset run %s: %w", run, err)
			}
		}
	}
	return nil
}

// ClearWeights removes every weights version an earlier run of the same
// ID left in its params store. A new run's publisher numbers its versions
// above every version in the store (HeldBound) and its readers start on
// the store's newest version, so without this a new run's workers would
// act on the earlier run's final policy and its learner would number its
// versions after the earlier run's. The controller calls it for a new run
// (not a resumed one, whose learner continues above those versions)
// before any worker starts.
func (n *NATS) ClearWeights(ctx context.Context, run string) error {
	obs, err := n.paramsBucket(ctx, run)
	if err != nil {
		return err
	}
	err = retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		st, err := obs.Status(ctx)
		if err != nil {
			return err
		}
		s, ok := st.(*jetstream.ObjectBucketStatus)
		if !ok {
			return fmt.Errorf("unexpected status %T", st)
		}
		stream, err := n.js.Stream(ctx, s.StreamInfo().Config.Name)
		if err != nil {
			return err
		}
		return stream.Purge(ctx)
	})
	if err != nil {
		return fmt.Errorf("dist: clear run %s's weights: %w", run, err)
	}
	return nil
}

// EndRun marks the run as ended, with what ended it (the learner's
// outcome, or the controller's reason), unless it is marked already: the
// first word stays. Workers that start after it exit at once instead of
// waiting for a run that is over.
func (n *NATS) EndRun(ctx context.Context, run, outcome string) error {
	kv, err := n.configBucket(ctx, run)
	if err != nil {
		return err
	}
	err = retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		_, err := kv.Create(ctx, "end", []byte(outcome))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("dist: mark run %s ended: %w", run, err)
	}
	return nil
}

// StopRun asks the run's learner to stop and save the run as
// interrupted (a controller's Ctrl-C), before the controller's
// registration goes: a learner that sees its controller gone after this
// takes it as an interruption, not as the loss of its controller.
func (n *NATS) StopRun(ctx context.Context, run, reason string) error {
	kv, err := n.configBucket(ctx, run)
	if err != nil {
		return err
	}
	err = retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		_, err := kv.Put(ctx, "stop", []byte(reason))
		return err
	})
	if err != nil {
		return fmt.Errorf("dist: ask run %s to stop: %w", run, err)
	}
	return nil
}

// RunStopped returns what StopRun stored, and whether the run was asked
// to stop.
func (n *NATS) RunStopped(ctx context.Context, run string) (string, bool, error) {
	return n.configKey(ctx, run, "stop")
}

// RunEnded returns what EndRun stored, and whether the run is marked
// ended.
func (n *NATS) RunEnded(ctx context.Context, run string) (string, bool, error) {
	return n.configKey(ctx, run, "end")
}

// configKey returns the value of key in the run's config bucket, and
// whether it is there.
func (n *NATS) configKey(ctx context.Context, run, key string) (string, bool, error) {
	kv, err := n.configBucket(ctx, run)
	if err != nil {
		return "", false, err
	}
	// A bucket just created on a cluster may have no stream leader yet
	// (no responders): that passes, as in bindOrCreate.
	var e jetstream.KeyValueEntry
	err = retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		var err error
		e, err = kv.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("dist: run %s's %s: %w", run, key, err)
	}
	return string(e.Value()), true, nil
}

func (n *NATS) configBucket(ctx context.Context, run string) (jetstream.KeyValue, error) {
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	return n.kvBucket(ctx, "config", jetstream.KeyValueConfig{Bucket: "herd_" + run + "_config", Replicas: n.replicas})
}

// ---- buckets and JetStream's availability ----

// failover bounds how long a JetStream call is retried through transient
// failures: the cluster's JetStream not ready yet (no meta leader), or a
// node lost and the streams it led without a leader until the survivors
// elect one (nats-server waits 4–9 s before an election, more on a loaded
// machine).
const failover = 30 * time.Second

// apiAttempt bounds one JetStream API call inside the retries: creating a
// replicated stream on a loaded cluster takes seconds.
const apiAttempt = 10 * time.Second

// publishAttempt bounds one publish inside the retries: one sent to a
// stream leader that died is never acknowledged, and the retry reaches the
// new leader once elected.
const publishAttempt = 4 * time.Second

// transient tells whether a JetStream call's error may go away by itself
// while the cluster elects leaders, catches up or reconnects.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, jetstream.ErrStreamNameAlreadyInUse): // another process created it first
		return true
	case errors.As(err, &apiErr):
		// 503: "JetStream system temporarily unavailable" and the like,
		// while the meta group or a stream has no leader; 10005 "no
		// suitable peers for placement": a cluster just started whose
		// meta leader does not know all the peers of an R3 bucket yet.
		return apiErr.Code == 503 || apiErr.ErrorCode == 10005
	}
	return false
}

// retryJS calls f, each call bounded by attempt, until it succeeds, fails
// for good, ctx ends, or failover has passed since the first call.
func retryJS(ctx context.Context, attempt time.Duration, f func(ctx context.Context) error) error {
	end := time.Now().Add(failover)
	for i := 0; ; i++ {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		if err != nil && ctx.Err() != nil {
			// The caller stopped waiting: say so, not the attempt's own
			// timeout, so that an interrupted run reads as interrupted.
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		if err == nil || !transient(err) {
			return err
		}
		if time.Now().After(end) {
			return fmt.Errorf("JetStream still unavailable after %v (is JetStream enabled on the servers, with a majority of the cluster's nodes up?): %w", failover, err)
		}
		if serr := sleep(ctx, max(backoff(i), 100*time.Millisecond)); serr != nil {
			return fmt.Errorf("%w (last error: %w)", serr, err)
		}
	}
}

// Ready waits until the servers' JetStream answers (a cluster has elected
// its meta leader), for at most failover or until ctx ends.
func (n *NATS) Ready(ctx context.Context) error {
	err := retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		_, err := n.js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("dist: JetStream not ready: %w", err)
	}
	return nil
}

// CreateBuckets makes the run's buckets (config, members with the TTL
// rounded up to seconds, params) one after the other. A launcher calls it
// before starting the workers, so that they bind to existing buckets
// instead of all creating the same replicated streams at once.
func (n *NATS) CreateBuckets(ctx context.Context, run string, ttl time.Duration) error {
	if _, err := n.configBucket(ctx, run); err != nil {
		return err
	}
	mem, err := n.Membership(ctx, run, Options{TTL: ttl})
	if err != nil {
		return err
	}
	_ = mem.Close()
	_, err = n.paramsBucket(ctx, run)
	return err
}

// kvBucket binds to cfg.Bucket, creating it when it is not there (see
// bindOrCreate).
func (n *NATS) kvBucket(ctx context.Context, what string, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return bindOrCreate(ctx, what,
		func(ctx context.Context) (jetstream.KeyValue, error) { return n.js.KeyValue(ctx, cfg.Bucket) },
		func(ctx context.Context) (jetstream.KeyValue, error) { return n.js.CreateKeyValue(ctx, cfg) })
}

// paramsBucket binds to the run's params object store, creating it when it
// is not there (see bindOrCreate).
func (n *NATS) paramsBucket(ctx context.Context, run string) (jetstream.ObjectStore, error) {
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	cfg := jetstream.ObjectStoreConfig{Bucket: "herd_" + run + "_params", Replicas: n.replicas}
	return bindOrCreate(ctx, "params",
		func(ctx context.Context) (jetstream.ObjectStore, error) { return n.js.ObjectStore(ctx, cfg.Bucket) },
		func(ctx context.Context) (jetstream.ObjectStore, error) { return n.js.CreateObjectStore(ctx, cfg) })
}

// bindOrCreate binds to a bucket, creating it when it is not there,
// through JetStream's transient failures. Binding first matters: every
// role opens the run's buckets at once, and concurrent updates of a
// replicated stream's config can stall the cluster's JetStream API past
// its timeout. An existing bucket keeps its config.
func bindOrCreate[B any](ctx context.Context, what string, bind, create func(context.Context) (B, error)) (B, error) {
	var b B
	err := retryJS(ctx, apiAttempt, func(ctx context.Context) error {
		var err error
		b, err = bind(ctx)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			b, err = create(ctx)
		}
		return err
	})
	if err != nil {
		var none B
		return none, fmt.Errorf("dist: %s bucket: %w", what, err)
	}
	return b, nil
}
