package transport

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"herd/weights"
)

// Inproc is the in-process twin of a NATS connection: the streams and
// services it makes connect the goroutines of one process through channels,
// handing slices over without copying. Streams made from one Inproc with the
// same run ID are connected; separate Inprocs are separate worlds.
type Inproc struct {
	mu struct {
		sync.Mutex
		infer   map[string]*inprocInferHub
		samples map[string]*inprocSampleHub
		params  map[string]*versionBox
		members map[string]*inprocMembers
		calls   map[string]*inprocCallHub
		groups  map[string]*inprocGroup
	}
}

// NewInproc returns an empty in-process world.
func NewInproc() *Inproc {
	w := &Inproc{}
	w.mu.infer = map[string]*inprocInferHub{}
	w.mu.samples = map[string]*inprocSampleHub{}
	w.mu.params = map[string]*versionBox{}
	w.mu.members = map[string]*inprocMembers{}
	w.mu.calls = map[string]*inprocCallHub{}
	w.mu.groups = map[string]*inprocGroup{}
	return w
}

// hub returns m[run], creating it with mk.
func hub[T any](w *Inproc, m map[string]T, run string, mk func() T) (T, error) {
	var zero T
	if err := checkName("run ID", run); err != nil {
		return zero, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := m[run]
	if !ok {
		h = mk()
		m[run] = h
	}
	return h, nil
}

// ---- inference ----

// inprocCall is one Infer in flight. state moves 0 (queued) → 1 (taken by
// a server) or 0 → 2 (abandoned by its caller), once, so a request whose
// caller left is never written and a taken one is always answered.
type inprocCall struct {
	r     *InferRequest
	state atomic.Int32
	done  chan error
}

type inprocInferHub struct {
	calls chan *inprocCall
}

type inprocInference struct {
	opt    Options
	hub    *inprocInferHub
	closed chan struct{}
	once   sync.Once
	pool   sync.Pool
	c      counters
}

// Inference returns the run's in-process inference stream.
func (w *Inproc) Inference(ctx context.Context, run string, opt Options) (InferenceStream, error) {
	opt = opt.withDefaults()
	if err := opt.checkDims(); err != nil {
		return nil, err
	}
	h, err := hub(w, w.mu.infer, run, func() *inprocInferHub {
		return &inprocInferHub{calls: make(chan *inprocCall, 1024)}
	})
	if err != nil {
		return nil, err
	}
	s := &inprocInference{opt: opt, hub: h, closed: make(chan struct{})}
	s.pool.New = func() any { return &inprocCall{done: make(chan error, 1)} }
	return s, nil
}

func (s *inprocInference) Infer(ctx context.Context, r *InferRequest) error {
	if err := s.opt.checkRequest(r); err != nil {
		return err
	}
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	c := s.pool.Get().(*inprocCall)
	c.r = r
	r.Arrived = time.Now()
	c.state.Store(0)
	select {
	case s.hub.calls <- c:
	case <-ctx.Done():
		s.pool.Put(c)
		return ctx.Err()
	case <-s.closed:
		s.pool.Put(c)
		return ErrClosed
	}
	var stop error
	select {
	case err := <-c.done:
		c.r = nil
		s.pool.Put(c)
		return err
	case <-ctx.Done():
		stop = ctx.Err()
	case <-s.closed:
		stop = ErrClosed
	}
	if c.state.CompareAndSwap(0, 2) {
		return stop // never taken; the server will skip it (c is not reused)
	}
	err := <-c.done // taken: the server is writing r.Out; wait for it
	c.r = nil
	s.pool.Put(c)
	return err
}

func (s *inprocInference) Serve(ctx context.Context, h BatchHandler) error {
	var batch []*InferRequest
	var calls []*inprocCall
	for {
		batch, calls = batch[:0], calls[:0]
		select {
		case c := <-s.hub.calls:
			calls = s.take(calls, c)
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return ErrClosed
		}
		rows := 0
		if len(calls) > 0 {
			rows = calls[0].r.Rows
		}
	drain:
		for rows < s.opt.MaxBatchRows {
			select {
			case c := <-s.hub.calls:
				n := len(calls)
				if calls = s.take(calls, c); len(calls) > n {
					rows += c.r.Rows
				}
			default:
				break drain
			}
		}
		if len(calls) == 0 {
			continue
		}
		for _, c := range calls {
			batch = append(batch, c.r)
		}
		err := h(ctx, batch)
		if err != nil {
			err = fmt.Errorf("%w: policy worker: %w", ErrRejected, err)
		}
		for _, c := range calls {
			c.done <- err
		}
	}
}

// take claims c for this server unless its caller already left.
func (s *inprocInference) take(calls []*inprocCall, c *inprocCall) []*inprocCall {
	if c.state.CompareAndSwap(0, 1) {
		return append(calls, c)
	}
	s.c.abandoned.Add(1)
	return calls
}

func (s *inprocInference) Stats() Stats { return s.c.stats() }

func (s *inprocInference) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// ---- samples ----

type inprocSampleHub struct {
	q          chan []byte
	seen       *seenSamples
	duplicates atomic.Uint64 // shared by the run's streams: a learner's Stats shows them
}

type inprocSamples struct {
	hub    *inprocSampleHub
	closed chan struct{}
	once   sync.Once
	c      counters
}

// Samples returns the run's in-process sample stream. Its queue holds
// opt.Capacity samples for all learners together.
func (w *Inproc) Samples(ctx context.Context, run string, opt Options) (SampleStream, error) {
	opt = opt.withDefaults()
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	if opt.Learner < 0 {
		return nil, fmt.Errorf("%w: learner %d", ErrBadRequest, opt.Learner)
	}
	key := sampleSubject(run, opt.Learner)
	w.mu.Lock()
	h, ok := w.mu.samples[key]
	if !ok {
		h = &inprocSampleHub{q: make(chan []byte, opt.Capacity), seen: newSeenSamples()}
		w.mu.samples[key] = h
	}
	w.mu.Unlock()
	return &inprocSamples{hub: h, closed: make(chan struct{})}, nil
}

func (s *inprocSamples) Push(ctx context.Context, id SampleID, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty sample", ErrBadRequest)
	}
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	// A channel send either happens or not, so the twin never queues a
	// retried push twice by itself; it still checks ids, so that it counts
	// a caller's repeats as the NATS stream does (pushes of one id come
	// from one pusher, one at a time, so checking before the send and
	// recording after it cannot let a repeat through).
	if s.hub.seen.seen(id) {
		s.hub.duplicates.Add(1)
		return nil
	}
	select {
	case s.hub.q <- b:
		s.hub.seen.add(id)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closed:
		return ErrClosed
	}
}

func (s *inprocSamples) Pull(ctx context.Context) ([]byte, error) {
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	select {
	case b := <-s.hub.q:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return nil, ErrClosed
	}
}

func (s *inprocSamples) Stats() Stats {
	st := s.c.stats()
	st.Duplicates = s.hub.duplicates.Load()
	st.Queued = uint64(len(s.hub.q))
	return st
}

func (s *inprocSamples) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// ---- actor calls ----

// inprocActorCall is one Call in flight; done has room for its answer, so
// the actor never blocks on a caller that left.
type inprocActorCall struct {
	seq  uint64
	body []byte
	done chan inprocAnswer
}

type inprocAnswer struct {
	body   []byte
	err    string
	repeat bool
}

// inprocCallHub holds each actor's mailbox of a run, made by whichever of
// Call and Serve comes first.
type inprocCallHub struct {
	mu     sync.Mutex
	actors map[string]chan *inprocActorCall
}

func (h *inprocCallHub) mailbox(actor string) chan *inprocActorCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.actors[actor]
	if !ok {
		ch = make(chan *inprocActorCall, 4) // one call in flight, and its repeats
		h.actors[actor] = ch
	}
	return ch
}

type inprocCalls struct {
	hub    *inprocCallHub
	closed chan struct{}
	once   sync.Once
	c      counters
}

// Calls returns the run's in-process actor-call stream.
func (w *Inproc) Calls(ctx context.Context, run string, opt Options) (CallStream, error) {
	h, err := hub(w, w.mu.calls, run, func() *inprocCallHub {
		return &inprocCallHub{actors: map[string]chan *inprocActorCall{}}
	})
	if err != nil {
		return nil, err
	}
	return &inprocCalls{hub: h, closed: make(chan struct{})}, nil
}

func (s *inprocCalls) Call(ctx context.Context, actor string, seq uint64, body []byte) ([]byte, error) {
	if err := checkCall(actor, seq); err != nil {
		return nil, err
	}
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	c := &inprocActorCall{seq: seq, body: body, done: make(chan inprocAnswer, 1)}
	select {
	case s.hub.mailbox(actor) <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return nil, ErrClosed
	}
	select {
	case a := <-c.done:
		if a.repeat {
			s.c.duplicates.Add(1)
		}
		return a.body, remoteError(a.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return nil, ErrClosed
	}
}

func (s *inprocCalls) Serve(ctx context.Context, actor string, h CallHandler) error {
	if err := checkName("actor", actor); err != nil {
		return err
	}
	box := s.hub.mailbox(actor)
	var mem callMemory
	for {
		select {
		case c := <-box:
			body, errText, dup := mem.handle(ctx, c.seq, c.body, h)
			if dup {
				s.c.duplicates.Add(1)
			}
			c.done <- inprocAnswer{body: body, err: errText, repeat: dup}
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return ErrClosed
		}
	}
}

func (s *inprocCalls) Stats() Stats { return s.c.stats() }

func (s *inprocCalls) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// ---- parameters ----

// versionBox holds the newest version known and wakes waiters when it
// changes. Both parameter services keep theirs in one.
type versionBox struct {
	cur     atomic.Pointer[weights.Version]
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
}

func newVersionBox() *versionBox { return &versionBox{changed: make(chan struct{})} }

// offer makes v the latest if it is newer, reporting whether it was.
func (b *versionBox) offer(v *weights.Version) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.cur.Load(); old != nil && v.N <= old.N {
		return false
	}
	b.cur.Store(v)
	close(b.changed)
	b.changed = make(chan struct{})
	return true
}

// check returns weights.ErrStale unless v is newer than the latest.
func (b *versionBox) check(v *weights.Version) error {
	if old := b.cur.Load(); old != nil && v.N <= old.N {
		return fmt.Errorf("%w: publishing %d after %d", weights.ErrStale, v.N, old.N)
	}
	return nil
}

func (b *versionBox) wait(ctx context.Context, n uint64, closed <-chan struct{}) (*weights.Version, error) {
	for {
		b.mu.Lock()
		v, ch := b.cur.Load(), b.changed
		b.mu.Unlock()
		if v != nil && v.N >= n {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-closed:
			return nil, ErrClosed
		}
	}
}

type inprocParams struct {
	box    *versionBox
	closed chan struct{}
	once   sync.Once
	c      counters
}

// Params returns the run's in-process parameter service: versions are
// shared by pointer, never copied or encoded.
func (w *Inproc) Params(ctx context.Context, run string, opt Options) (ParamService, error) {
	b, err := hub(w, w.mu.params, run, newVersionBox)
	if err != nil {
		return nil, err
	}
	return &inprocParams{box: b, closed: make(chan struct{})}, nil
}

func (p *inprocParams) Publish(ctx context.Context, v *weights.Version) error {
	select {
	case <-p.closed:
		return ErrClosed
	default:
	}
	if !p.box.offer(v) {
		return p.box.check(v)
	}
	return nil
}

func (p *inprocParams) Latest() *weights.Version { return p.box.cur.Load() }

// Announced is Latest's number: versions pass by pointer, with nothing to
// download.
func (p *inprocParams) Announced() uint64 {
	if v := p.box.cur.Load(); v != nil {
		return v.N
	}
	return 0
}

func (p *inprocParams) Wait(ctx context.Context, n uint64) (*weights.Version, error) {
	return p.box.wait(ctx, n, p.closed)
}

func (p *inprocParams) Stats() Stats { return p.c.stats() }

func (p *inprocParams) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

// ---- membership ----

// inprocMembers is one run's registry: each entry expires when its timer
// fires before the next keep-alive resets it.
type inprocMembers struct {
	mu       sync.Mutex
	progress map[string]Progress
	entries  map[string]*inprocEntry
	gone     map[string][]chan struct{} // closed when the name goes
}

type inprocEntry struct {
	info  []byte
	timer *time.Timer
}

type inprocMembership struct {
	reg    *inprocMembers
	ttl    time.Duration
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	c      counters
}

// Membership returns the run's in-process name service. Registrations
// expire opt.TTL after their last keep-alive.
func (w *Inproc) Membership(ctx context.Context, run string, opt Options) (Membership, error) {
	opt = opt.withDefaults()
	r, err := hub(w, w.mu.members, run, func() *inprocMembers {
		return &inprocMembers{entries: map[string]*inprocEntry{}, gone: map[string][]chan struct{}{}, progress: map[string]Progress{}}
	})
	if err != nil {
		return nil, err
	}
	return &inprocMembership{reg: r, ttl: opt.TTL, closed: make(chan struct{})}, nil
}

// put registers or refreshes name.
func (r *inprocMembers) put(name string, info []byte, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[name]; ok {
		e.info = info
		if e.timer.Stop() {
			e.timer.Reset(ttl)
			return
		}
		// The timer fired and its removal is waiting for the lock: leave
		// it to remove this entry's old self and start a fresh entry.
	}
	e := &inprocEntry{info: info}
	e.timer = time.AfterFunc(ttl, func() { r.remove(name, e) })
	r.entries[name] = e
}

// remove deletes name if it is still the entry e (any entry when e is nil).
func (r *inprocMembers) remove(name string, e *inprocEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.entries[name]
	if !ok || (e != nil && cur != e) {
		return
	}
	cur.timer.Stop()
	delete(r.entries, name)
	for _, ch := range r.gone[name] {
		close(ch)
	}
	delete(r.gone, name)
}

type inprocLease struct {
	stop func() error
}

func (l inprocLease) Close() error { return l.stop() }

func (m *inprocMembership) Register(ctx context.Context, name string, info []byte) (Lease, error) {
	if err := checkName("member name", name); err != nil {
		return nil, err
	}
	select {
	case <-m.closed:
		return nil, ErrClosed
	default:
	}
	info = slices.Clone(info)
	m.reg.put(name, info, m.ttl)
	return startKeepAlive(ctx, m.closed, &m.wg, m.ttl,
		func() error { m.reg.put(name, info, m.ttl); return nil },
		func() error { m.reg.remove(name, nil); return nil }), nil
}

func (m *inprocMembership) Members(ctx context.Context) ([]Member, error) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	out := make([]Member, 0, len(m.reg.entries))
	for name, e := range m.reg.entries {
		out = append(out, Member{Name: name, Info: slices.Clone(e.info)})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func (m *inprocMembership) Gone(ctx context.Context, name string) (<-chan struct{}, error) {
	if err := checkName("member name", name); err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	if _, ok := m.reg.entries[name]; !ok {
		close(ch)
		return ch, nil
	}
	m.reg.gone[name] = append(m.reg.gone[name], ch)
	return ch, nil
}

func (m *inprocMembership) Resume(ctx context.Context, name string) (Progress, error) {
	if err := checkName("member name", name); err != nil {
		return Progress{}, err
	}
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	p := m.reg.progress[name]
	p.Incarnation++
	m.reg.progress[name] = p
	return p, nil
}

func (m *inprocMembership) Save(ctx context.Context, name string, p Progress) error {
	if err := checkName("member name", name); err != nil {
		return err
	}
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	m.reg.progress[name] = p
	return nil
}

func (m *inprocMembership) Progress(ctx context.Context) (map[string]Progress, error) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	out := make(map[string]Progress, len(m.reg.progress))
	maps.Copy(out, m.reg.progress)
	return out, nil
}

func (m *inprocMembership) Stats() Stats { return m.c.stats() }

func (m *inprocMembership) Close() error {
	m.once.Do(func() { close(m.closed) })
	m.wg.Wait()
	return nil
}

// startKeepAlive refreshes a registration every TTL/3 until ctx ends (then
// it simply stops, and the registration expires as a crashed worker's
// would) or the service closes (the same), or the lease is closed (then
// remove runs once). wg tracks the goroutine so the service's Close waits
// for it.
func startKeepAlive(ctx context.Context, closed <-chan struct{}, wg *sync.WaitGroup, ttl time.Duration, refresh, remove func() error) Lease {
	stop := make(chan struct{})
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		t := time.NewTicker(max(ttl/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = refresh() // a failed refresh is retried on the next tick; the TTL covers two misses
			case <-ctx.Done():
				return
			case <-closed:
				return
			case <-stop:
				return
			}
		}
	}()
	var once sync.Once
	var err error
	return inprocLease{stop: func() error {
		once.Do(func() {
			close(stop)
			<-done
			err = remove()
		})
		return err
	}}
}
