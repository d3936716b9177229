package transport

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// The learners' all-gather rides on what the run already has: core NATS
// publish/subscribe on one subject (herd.<run>.gather), every member
// receiving every message, or channels in-process. It is an all-gather,
// not a reduce: each member sums the contributions itself in member-id
// order, so every member gets the same bits without a root that
// broadcasts a result (one hop fewer), and a direct TCP ring would need
// addresses, ports and a second security setup (TLS, credentials) for
// bandwidth that matters only for large models: with M members each sends
// its message once and receives M−1, which for M = 2 is what a ring moves.

// ---- in-process ----

type inprocGroup struct {
	mu     sync.Mutex
	size   int
	joined []bool
	rounds map[uint64]*inprocRound
	// broken is closed once a member leaves (Close) or joins a second
	// time (a restart): why says which. A round that cannot complete any
	// more fails at once with it, rather than at its deadline.
	broken chan struct{}
	why    error
}

// breakGroup marks the group broken for why (the first cause stays);
// g.mu is held.
func (g *inprocGroup) breakGroup(why error) {
	if g.why == nil {
		g.why = why
		close(g.broken)
	}
}

type inprocRound struct {
	got  [][]byte // from AllGather
	vals []any    // from Share (nil too)
	in   []bool   // members that contributed
	n    int      // contributions
	read int      // members that took the result
	done chan struct{}
}

// diverged returns the first member whose contribution came by the other
// call than this member's (AllGather when bytes, else Share), as from
// learners whose calls diverged; -1 for none.
func (r *inprocRound) diverged(bytes bool) int {
	for k := range r.in {
		if (r.got[k] != nil) != bytes {
			return k
		}
	}
	return -1
}

type inprocCollective struct {
	g       *inprocGroup
	id      int
	timeout time.Duration
	round   uint64
}

// Collective joins the run's in-process learner group. The first member
// fixes the group's size; a member of another size, or a second member with
// the same id, is refused.
func (w *Inproc) Collective(ctx context.Context, run string, opt Options) (Collective, error) {
	opt = opt.withDefaults()
	if err := opt.checkGroup(); err != nil {
		return nil, err
	}
	g, err := hub(w, w.mu.groups, run, func() *inprocGroup {
		return &inprocGroup{size: opt.Learners, joined: make([]bool, opt.Learners), rounds: map[uint64]*inprocRound{}, broken: make(chan struct{})}
	})
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.size != opt.Learners {
		return nil, fmt.Errorf("%w: a group of %d learners, joined as one of %d", ErrBadRequest, g.size, opt.Learners)
	}
	if g.joined[opt.Learner] {
		// A member started again (its process restarted) cannot take up
		// the group's rounds where its first start left them: the group
		// fails at once, the others too.
		g.breakGroup(rejoined(opt.Learner))
		return nil, fmt.Errorf("%w: learner %d joined twice: %w", ErrBadRequest, opt.Learner, g.why)
	}
	g.joined[opt.Learner] = true
	return &inprocCollective{g: g, id: opt.Learner, timeout: opt.GatherTimeout}, nil
}

func (c *inprocCollective) AllGather(ctx context.Context, b []byte) ([][]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: an empty contribution", ErrBadRequest)
	}
	var out [][]byte
	err := c.gather(ctx, func(r *inprocRound) { r.got[c.id] = b }, func(r *inprocRound) error {
		if k := r.diverged(true); k >= 0 {
			return fmt.Errorf("%w: learner %d, round %d: learner %d shared a value where the others sent bytes (the learners' calls diverged)", ErrGather, c.id, c.round, k)
		}
		out = make([][]byte, len(r.got))
		copy(out, r.got)
		return nil
	})
	return out, err
}

// Sharer is a Collective whose members share one address space (the
// in-process transport's): besides bytes they can all-gather Go values,
// such as pointers to the buffers each member then reads and writes in
// place until a later round tells it the others are done.
type Sharer interface {
	Collective
	// Share is AllGather of v (nil allowed) in the same sequence of
	// rounds: out[own id] is v.
	Share(ctx context.Context, v any) ([]any, error)
}

func (c *inprocCollective) Share(ctx context.Context, v any) ([]any, error) {
	var out []any
	err := c.gather(ctx, func(r *inprocRound) { r.vals[c.id] = v }, func(r *inprocRound) error {
		if k := r.diverged(false); k >= 0 {
			return fmt.Errorf("%w: learner %d, round %d: learner %d sent bytes where the others shared values (the learners' calls diverged)", ErrGather, c.id, c.round, k)
		}
		out = make([]any, len(r.vals))
		copy(out, r.vals)
		return nil
	})
	return out, err
}

// gather runs this member's next round: put contributes to it (under the
// group's lock), and once every member has, take reads the round.
func (c *inprocCollective) gather(ctx context.Context, put func(*inprocRound), take func(*inprocRound) error) error {
	c.round++
	g := c.g
	g.mu.Lock()
	r := g.rounds[c.round]
	if r == nil {
		r = &inprocRound{got: make([][]byte, g.size), vals: make([]any, g.size), in: make([]bool, g.size), done: make(chan struct{})}
		g.rounds[c.round] = r
	}
	put(r)
	r.in[c.id] = true
	r.n++
	if r.n == g.size {
		close(r.done)
	}
	g.mu.Unlock()
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return c.fail(r, ctx.Err())
	case <-t.C:
		return c.fail(r, context.DeadlineExceeded)
	case <-g.broken:
		// A round every member contributed to completes even when one
		// leaves right after it.
		select {
		case <-r.done:
		default:
			g.mu.Lock()
			why := g.why
			g.mu.Unlock()
			return fmt.Errorf("%w: learner %d, round %d: %w", ErrGather, c.id, c.round, why)
		}
	}
	err := take(r)
	g.mu.Lock()
	r.read++
	if r.read == g.size {
		delete(g.rounds, c.round)
	}
	g.mu.Unlock()
	return err
}

func (c *inprocCollective) fail(r *inprocRound, cause error) error {
	c.g.mu.Lock()
	var m []int
	for i, in := range r.in {
		if !in {
			m = append(m, i)
		}
	}
	c.g.mu.Unlock()
	return fmt.Errorf("%w: learner %d, round %d: nothing from learner(s) %v within %v: %w", ErrGather, c.id, c.round, m, c.timeout, cause)
}

// Close leaves the group: a member still waiting for a round fails at
// once, naming this one.
func (c *inprocCollective) Close() error {
	c.g.mu.Lock()
	c.g.breakGroup(fmt.Errorf("learner %d left the group after round %d (stopped or failed)", c.id, c.round))
	c.g.mu.Unlock()
	return nil
}

// rejoined is the cause of a group's failure when learner id joins it a
// second time.
func rejoined(id int) error {
	return fmt.Errorf("learner %d started again (restarted): a learner group cannot take a member back mid-run, since the others' rounds went on without it", id)
}

// ---- NATS ----

const (
	gatherFrom  = "Herd-From"
	gatherRound = "Herd-Round" // 0: a hello ("Herd-Hello: ack" for an answer)
	gatherSize  = "Herd-Size"
	gatherHello = "Herd-Hello"
	gatherWant  = "Herd-Want" // a request to send round Herd-Round again
	// gatherDone is a hello's or ack's rounds completed by its sender: a
	// member that says hello after a round completed started again.
	gatherDone = "Herd-Done"
	helloBye   = "bye" // Herd-Hello of a member leaving (Close)
	// helloEvery is how often a member repeats its hello until it has
	// heard from every other member.
	helloEvery = 100 * time.Millisecond
	// resendFirst is how long a member waits for a round before it asks
	// the members it has not heard from to send their contributions again;
	// the wait doubles up to resendMax.
	resendFirst = 200 * time.Millisecond
	resendMax   = 2 * time.Second
)

type natsCollective struct {
	n        *NATS
	subj     string
	id, size int
	timeout  time.Duration
	sub      *nats.Subscription
	wake     chan struct{} // a message arrived (capacity 1)
	round    uint64

	mu     sync.Mutex
	heard  []bool                // members heard from: subscribed, so a publish reaches them
	rounds map[uint64][][]byte   // contributions of rounds not yet returned
	parts  map[partKey]*assembly // chunked contributions still coming in
	bad    error                 // a member of another group size, or one that started again
	left   []bool                // members that said bye
	done   uint64                // the last round returned
	// sent and prev are this member's contributions to the current round
	// (once published) and to the last round returned, kept to answer a
	// member that asks for them again: a member can be one round behind
	// the others, never more, since no round completes without it.
	sent, prev contribution
	c          counters
	gs         GatherStats
	// publishHook, when set (by tests), sees every message (chunk k of
	// a contribution; 0 for one that is not cut) before it is published
	// and may drop it, as a server failure does.
	publishHook func(round uint64, want bool, k int) (drop bool)
}

// partKey is one member's contribution to one round.
type partKey struct {
	round uint64
	from  int
}

// contribution is one member's message of one round.
type contribution struct {
	round uint64
	data  []byte
}

// GatherStats counts a learner group member's recoveries: requests it
// sent for contributions it was missing, contributions it sent again on
// request, and contributions that arrived again after their round (and
// were dropped); and the chunks it sent and received of contributions
// over the connection's max payload (resends included).
type GatherStats struct {
	Requests, Resent, Stale    uint64
	ChunksSent, ChunksReceived uint64
}

// Collective joins the run's learner group on NATS. Core NATS delivers a
// message only to those subscribed when it is published, so before the
// first round each member repeats a hello until it has heard from every
// other one (each answers a hello with an ack): after that every member is
// subscribed and no round's message can be missed while the connection
// holds. A message lost in a server failure or a reconnect to another
// node is sent again: a member still waiting for a round after
// resendFirst (doubling up to resendMax) asks for it with Herd-Want, and
// every member answers with its contribution to that round, which it keeps
// until the round after it completes. Contributions that arrive twice are
// dropped by round number. A member that stays silent ends the run at the
// round's timeout, with an error naming it.
func (n *NATS) Collective(ctx context.Context, run string, opt Options) (Collective, error) {
	opt = opt.withDefaults()
	if err := opt.checkGroup(); err != nil {
		return nil, err
	}
	if err := checkName("run ID", run); err != nil {
		return nil, err
	}
	c := &natsCollective{n: n, subj: "herd." + run + ".gather", id: opt.Learner, size: opt.Learners, timeout: opt.GatherTimeout,
		wake: make(chan struct{}, 1), heard: make([]bool, opt.Learners), left: make([]bool, opt.Learners), rounds: map[uint64][][]byte{},
		parts: map[partKey]*assembly{}}
	c.heard[c.id] = true
	sub, err := n.nc.Subscribe(c.subj, c.receive)
	if err != nil {
		return nil, fmt.Errorf("dist: subscribe %s: %w", c.subj, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("dist: subscribe %s: %w", c.subj, err)
	}
	c.sub = sub
	return c, nil
}

// receive is the subscription's handler.
func (c *natsCollective) receive(m *nats.Msg) {
	from, err1 := strconv.Atoi(m.Header.Get(gatherFrom))
	round, err2 := strconv.ParseUint(m.Header.Get(gatherRound), 10, 64)
	size, err3 := strconv.Atoi(m.Header.Get(gatherSize))
	if err1 != nil || err2 != nil || err3 != nil || from < 0 || from >= c.size {
		c.c.malformed.Add(1)
		return
	}
	if from == c.id {
		return // our own message, echoed
	}
	if m.Header.Get(gatherWant) != "" {
		c.answer(round)
		return
	}
	hello := m.Header.Get(gatherHello)
	c.mu.Lock()
	if size != c.size {
		c.bad = fmt.Errorf("%w: learner %d is in a group of %d, this one of %d", ErrBadRequest, from, size, c.size)
	}
	if round == 0 {
		// Every member says hello before its first contribution and no
		// round completes without that, so a hello after a completed
		// round comes from a member that started again, and an answer
		// that says its sender completed rounds goes to one.
		done, _ := strconv.ParseUint(m.Header.Get(gatherDone), 10, 64)
		switch {
		case hello == helloBye:
			c.left[from] = true
		case hello != "ack" && c.done > 0 && c.bad == nil:
			c.bad = fmt.Errorf("%w: learner %d, round %d: %w", ErrGather, c.id, c.done+1, rejoined(from))
		case done > 0 && c.done == 0 && c.bad == nil:
			c.bad = fmt.Errorf("%w: learner %d (started again) joined a group that had completed %d rounds: %w", ErrGather, c.id, done, rejoined(c.id))
		}
	}
	c.heard[from] = true
	if round > 0 && round <= c.done {
		c.gs.Stale++
		c.mu.Unlock()
		return
	}
	if round > 0 {
		got := c.rounds[round]
		if got == nil {
			got = make([][]byte, c.size)
			c.rounds[round] = got
		}
		if got[from] == nil {
			got[from] = c.reassemble(partKey{round, from}, m)
		}
	}
	c.mu.Unlock()
	if round == 0 && hello != "ack" && hello != helloBye {
		_ = c.publish(0, nil, "ack") // an ack lost is repeated with the next hello
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// reassemble returns the contribution m carries: m's data, or for a
// chunk the whole contribution once its last chunk is in (nil before).
// Chunks that cannot be put together fail the group; c.mu is held.
func (c *natsCollective) reassemble(key partKey, m *nats.Msg) []byte {
	hv := m.Header.Get(gatherChunk)
	if hv == "" {
		return m.Data
	}
	c.gs.ChunksReceived++
	h, err := parseChunk(hv)
	if err == nil {
		a := c.parts[key]
		if a == nil {
			a = newAssembly(h)
			c.parts[key] = a
		}
		var whole []byte
		if whole, err = a.add(h, m.Data); err == nil {
			if whole != nil {
				delete(c.parts, key)
			}
			return whole
		}
	}
	if c.bad == nil {
		c.bad = fmt.Errorf("%w: learner %d, round %d: learner %d's contribution: %w", ErrGather, c.id, key.round, key.from, err)
	}
	return nil
}

// answer sends this member's contribution to round again, if it has one:
// another member asked for it.
func (c *natsCollective) answer(round uint64) {
	c.mu.Lock()
	var b []byte
	switch round {
	case c.sent.round:
		b = c.sent.data
	case c.prev.round:
		b = c.prev.data
	}
	if b != nil {
		c.gs.Resent++
	}
	c.mu.Unlock()
	if b != nil {
		_ = c.contribute(round, b)
	}
}

// gatherHeaderRoom is what a contribution's chunk leaves of the max
// payload for its headers.
const gatherHeaderRoom = 1024

// contribute publishes b, this member's contribution to round, in chunks
// where it is over the connection's max payload.
func (c *natsCollective) contribute(round uint64, b []byte) error {
	parts, hs := splitChunks(b, int(c.n.nc.MaxPayload())-gatherHeaderRoom)
	if hs == nil {
		return c.publish(round, b, "")
	}
	for k, p := range parts {
		if err := c.send(round, p, "", false, &hs[k]); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.gs.ChunksSent += uint64(len(parts))
	c.mu.Unlock()
	return nil
}

func (c *natsCollective) publish(round uint64, b []byte, hello string) error {
	return c.send(round, b, hello, false, nil)
}

func (c *natsCollective) send(round uint64, b []byte, hello string, want bool, chunk *chunkHeader) error {
	k := 0
	if chunk != nil {
		k = chunk.k
	}
	if c.publishHook != nil && c.publishHook(round, want, k) {
		return nil
	}
	msg := &nats.Msg{Subject: c.subj, Data: b, Header: nats.Header{}}
	if chunk != nil {
		msg.Header.Set(gatherChunk, chunk.String())
	}
	msg.Header.Set(gatherFrom, strconv.Itoa(c.id))
	msg.Header.Set(gatherRound, strconv.FormatUint(round, 10))
	msg.Header.Set(gatherSize, strconv.Itoa(c.size))
	if hello != "" {
		msg.Header.Set(gatherHello, hello)
		c.mu.Lock()
		msg.Header.Set(gatherDone, strconv.FormatUint(c.done, 10))
		c.mu.Unlock()
	}
	if want {
		msg.Header.Set(gatherWant, "1")
	}
	return c.n.nc.PublishMsg(msg)
}

// GatherStats returns the member's recovery counts so far.
func (c *natsCollective) GatherStats() GatherStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gs
}

func (c *natsCollective) AllGather(ctx context.Context, b []byte) ([][]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: an empty contribution", ErrBadRequest)
	}
	if mp := c.n.nc.MaxPayload(); mp <= 2*gatherHeaderRoom {
		return nil, fmt.Errorf("%w: the NATS server's max_payload of %d bytes leaves no room for a contribution's chunks", ErrBadRequest, mp)
	}
	c.round++
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	var hello *time.Ticker
	if c.round == 1 {
		if err := c.publish(0, nil, "hello"); err != nil {
			return nil, fmt.Errorf("dist: all-gather: %w", err)
		}
		hello = time.NewTicker(helloEvery)
		defer hello.Stop()
	}
	sent := false
	wait := resendFirst
	resend := time.NewTimer(wait)
	defer resend.Stop()
	for {
		c.mu.Lock()
		ready := !slicesContainsFalse(c.heard)
		got := c.rounds[c.round]
		complete := got != nil && len(missingBut(got, c.id)) == 0
		bad := c.bad
		gone := -1
		for i, l := range c.left {
			if l && (got == nil || got[i] == nil) {
				gone = i
			}
		}
		c.mu.Unlock()
		if bad != nil {
			return nil, bad
		}
		if gone >= 0 && !complete {
			// A member's contributions reach the others before its bye.
			return nil, fmt.Errorf("%w: learner %d, round %d: learner %d left the group (stopped or failed)", ErrGather, c.id, c.round, gone)
		}
		if ready && !sent {
			c.mu.Lock()
			c.sent = contribution{round: c.round, data: b}
			c.mu.Unlock()
			if err := c.contribute(c.round, b); err != nil {
				return nil, fmt.Errorf("dist: all-gather: %w", err)
			}
			sent = true
			if hello != nil {
				hello.Stop()
			}
		}
		if sent && complete {
			// Complete rounds are no longer written: every member sends
			// once per round.
			out := make([][]byte, c.size)
			c.mu.Lock()
			copy(out, got)
			delete(c.rounds, c.round)
			for k := range c.parts {
				if k.round <= c.round {
					delete(c.parts, k)
				}
			}
			c.done, c.prev = c.round, c.sent
			c.mu.Unlock()
			out[c.id] = b
			return out, nil
		}
		var tick <-chan time.Time
		if hello != nil && !sent {
			tick = hello.C
		}
		select {
		case <-c.wake:
		case <-tick:
			_ = c.publish(0, nil, "hello")
		case <-resend.C:
			if sent {
				c.mu.Lock()
				c.gs.Requests++
				c.mu.Unlock()
				_ = c.send(c.round, nil, "", true, nil)
			}
			wait = min(2*wait, resendMax)
			resend.Reset(wait)
		case <-ctx.Done():
			return nil, c.fail(ctx.Err())
		case <-deadline.C:
			return nil, c.fail(context.DeadlineExceeded)
		}
	}
}

func (c *natsCollective) fail(cause error) error {
	c.mu.Lock()
	var m []int
	if got := c.rounds[c.round]; got != nil {
		m = missingBut(got, c.id)
	} else {
		for i := range c.size {
			if i != c.id {
				m = append(m, i)
			}
		}
	}
	var partly []string
	for _, i := range m {
		if a := c.parts[partKey{c.round, i}]; a != nil {
			partly = append(partly, fmt.Sprintf("learner %d's chunk(s) %v of %d", i, a.missing(), a.first.n))
		}
	}
	c.mu.Unlock()
	if partly != nil {
		return fmt.Errorf("%w: learner %d, round %d: %w missing within %v: %s: %w", ErrGather, c.id, c.round, ErrChunk, c.timeout, strings.Join(partly, ", "), cause)
	}
	return fmt.Errorf("%w: learner %d, round %d: nothing from learner(s) %v within %v: %w", ErrGather, c.id, c.round, m, c.timeout, cause)
}

// Close leaves the group, saying bye, so that a member still waiting for
// this one's contribution fails at once.
func (c *natsCollective) Close() error {
	_ = c.publish(0, nil, helloBye)
	return c.sub.Unsubscribe()
}

// missingBut is missing without member id.
func missingBut(got [][]byte, id int) []int {
	var m []int
	for _, i := range missing(got) {
		if i != id {
			m = append(m, i)
		}
	}
	return m
}

func slicesContainsFalse(b []bool) bool {
	for _, v := range b {
		if !v {
			return true
		}
	}
	return false
}
