package flow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"herd/internal/trainstate"
)

// Actor runs functions one at a time, in the order they were sent, on a
// goroutine of its own: the mailbox of one source actor (an env worker, a
// replay shard). Everything a shard computes and every message it receives
// runs there, so a shard's state needs no lock, and a message sent before
// a fetch is seen before that fetch (the ordering GatherSync relies on).
// Send never blocks; the mailbox grows as needed. Close stops the
// goroutine; messages not yet run are dropped.
type Actor struct {
	mu      sync.Mutex
	queue   []func()
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// NewActor starts an actor's goroutine; its owner must Close it.
func NewActor() *Actor {
	a := &Actor{wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go a.loop()
	return a
}

func (a *Actor) loop() {
	defer close(a.stopped)
	for {
		a.mu.Lock()
		if len(a.queue) == 0 {
			a.mu.Unlock()
			select {
			case <-a.wake:
				continue
			case <-a.done:
				return
			}
		}
		f := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		a.mu.Unlock()
		select {
		case <-a.done:
			return
		default:
		}
		f()
	}
}

// Send queues f to run on the actor after everything sent before it.
func (a *Actor) Send(f func()) {
	a.mu.Lock()
	a.queue = append(a.queue, f)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Call runs f on the actor after everything sent before it and waits for
// its error (a message whose reply is awaited).
func (a *Actor) Call(ctx context.Context, f func() error) error {
	reply := make(chan error, 1)
	a.Send(func() { reply <- f() })
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-a.stopped:
		return errors.New("flow: actor closed")
	}
}

// Close stops the actor and waits for the function it is running.
func (a *Actor) Close() {
	a.once.Do(func() { close(a.done) })
	<-a.stopped
}

// Shard is one source of a ParIter: an actor and the function that
// produces its next item there. Next returns ErrEnd when the shard has no
// more items.
type Shard[T any] struct {
	Actor *Actor
	Next  func() (T, error)
	// Claim, when not nil, is asked before each request, on the
	// goroutine that makes it: false ends the shard (ErrEnd) without
	// running Next. Requests are made in an order the plan fixes, so
	// which of them a budget allows does not depend on the actors'
	// timing.
	Claim func() bool
}

// ParIter is a lazy stream sharded across source actors: each shard's
// items are produced on its own actor, in parallel with the others, and
// only when a gather operator asks for them. ParForEach adds work that runs
// on the shard's actor; GatherSync and GatherAsync turn it into an Iter.
type ParIter[T any] struct {
	ctx    context.Context
	shards []Shard[T]
	r      *Run // the run whose checkpoints hold the gathers' state (nil: none)
}

// NewParIter returns the ParIter over shards; ctx bounds every wait of the
// gather operators.
func NewParIter[T any](ctx context.Context, shards []Shard[T]) ParIter[T] {
	return ParIter[T]{ctx: ctx, shards: shards}
}

// Len is the number of shards.
func (p ParIter[T]) Len() int { return len(p.shards) }

// Actor returns shard k's actor, to send it messages (UpdateWeights).
func (p ParIter[T]) Actor(k int) *Actor { return p.shards[k].Actor }

// ParForEach applies f to every item of every shard, on the shard's actor
// (in parallel across shards).
func ParForEach[T, U any](p ParIter[T], f func(T) (U, error)) ParIter[U] {
	out := ParIter[U]{ctx: p.ctx, shards: make([]Shard[U], len(p.shards)), r: p.r}
	for k, s := range p.shards {
		next := s.Next
		out.shards[k] = Shard[U]{Actor: s.Actor, Claim: s.Claim, Next: func() (U, error) {
			x, err := next()
			if err != nil {
				var zero U
				return zero, err
			}
			return f(x)
		}}
	}
	return out
}

// item is one reply of a shard.
type item[T any] struct {
	k   int
	v   T
	err error
}

// request asks shard k for its next item, delivered on out (which has room
// for every request in flight, so an actor never blocks on it).
func (p ParIter[T]) request(k int, out chan<- item[T]) {
	s := p.shards[k]
	if s.Claim != nil && !s.Claim() {
		s.Actor.Send(func() { out <- item[T]{k: k, err: ErrEnd} })
		return
	}
	next := s.Next
	s.Actor.Send(func() {
		v, err := next()
		out <- item[T]{k: k, v: v, err: err}
	})
}

// ErrUneven is returned by GatherSync when some shards end and others
// still have items: a round would be incomplete, and its items are not
// dropped silently.
var ErrUneven = errors.New("flow: shards ended in different rounds")

// GatherSync yields one item from every shard per round, in shard order,
// as a slice: a barrier. A round's requests are sent only when the
// consumer pulls the round, so the shards' actors are idle between rounds,
// and a message sent to a shard after one round was yielded (UpdateWeights)
// runs before that shard's item of the next round. The stream ends when
// every shard ends in the same round. It is GatherSyncAhead(p, 1).
func GatherSync[T any](p ParIter[T]) Iter[[]T] { return GatherSyncAhead(p, 1) }

// GatherSyncAhead is GatherSync with numAsync rounds in flight: when the
// consumer is done with round r (pulls the next one), round r + numAsync
// is requested, so the shards produce the next rounds while the consumer
// works on this one instead of idling behind the barrier. A message sent
// after round r was yielded runs before round r + numAsync's items and
// after round r + numAsync − 1's were requested: the items of a round lag
// the messages by exactly numAsync − 1 rounds, whatever the timing, so a
// plan made of it still gives the same bits for any number of shards. It
// holds at most numAsync × Len() items the consumer has not taken.
// numAsync 1 is GatherSync.
func GatherSyncAhead[T any](p ParIter[T], numAsync int) Iter[[]T] {
	n := len(p.shards)
	// One channel per round in flight (round r uses outs[r % numAsync]),
	// each with room for a whole round, so rounds never mix and an actor
	// never blocks on its reply.
	var outs []chan item[T]
	r := 0 // the round the consumer has
	inYield, done := false, false
	var restored *gatherState[T]
	registerGather(p, func(ctx context.Context) (gatherState[T], error) {
		st := gatherState[T]{Yielded: r, Done: done || !inYield}
		if st.Done {
			return st, nil
		}
		// Wait for the rounds requested ahead, and put them back.
		for i := 1; i < numAsync; i++ {
			out := outs[(r+i)%numAsync]
			round := make([]item[T], 0, n)
			for range n {
				select {
				case it := <-out:
					round = append(round, it)
				case <-ctx.Done():
					return st, ctx.Err()
				}
			}
			for _, it := range round {
				out <- it
				if it.err != nil && !errors.Is(it.err, ErrEnd) {
					return st, fmt.Errorf("shard %d: %w", it.k, it.err)
				}
				st.Items = append(st.Items, held[T]{K: it.k, At: r + i, V: it.v, End: it.err != nil})
			}
		}
		return st, nil
	}, func(st gatherState[T]) error {
		// Every round requested ahead is whole: n items each.
		if !st.Done && len(st.Items) != n*(numAsync-1) {
			return fmt.Errorf("%w: a gather holds %d items, want %d rounds of %d", trainstate.ErrCorrupt, len(st.Items), numAsync-1, n)
		}
		count := make(map[[2]int]int)
		for _, h := range st.Items {
			if h.K < 0 || h.K >= n || h.At <= st.Yielded || h.At >= st.Yielded+numAsync || count[[2]int{h.K, h.At}] > 0 {
				return fmt.Errorf("%w: a gather's held item of shard %d, round %d, does not fit round %d", trainstate.ErrCorrupt, h.K, h.At, st.Yielded)
			}
			count[[2]int{h.K, h.At}]++
		}
		restored = &st
		return nil
	})
	return func(yield func([]T, error) bool) {
		if numAsync < 1 {
			yield(nil, fmt.Errorf("flow: GatherSyncAhead: numAsync %d must be ≥ 1", numAsync))
			return
		}
		defer func() { done = true }()
		outs = make([]chan item[T], numAsync)
		for i := range outs {
			outs[i] = make(chan item[T], n)
		}
		r = 0
		if st := restored; st != nil && !st.Done {
			// Resumed inside round st.Yielded: the rounds requested ahead
			// are back in their channels, and the round after them is
			// requested as that round's consumer left it.
			for _, h := range st.Items {
				it := item[T]{k: h.K, v: h.V}
				if h.End {
					it.err = ErrEnd
				}
				outs[h.At%numAsync] <- it
			}
			r = st.Yielded
			for k := range n {
				p.request(k, outs[r%numAsync])
			}
			r++
		} else {
			for i := range outs {
				for k := range n {
					p.request(k, outs[i])
				}
			}
		}
		for ; ; r++ {
			out := outs[r%numAsync]
			round, ended := make([]T, n), 0
			var errs []error
			for range n {
				select {
				case it := <-out:
					switch {
					case errors.Is(it.err, ErrEnd):
						ended++
					case it.err != nil:
						errs = append(errs, fmt.Errorf("shard %d: %w", it.k, it.err))
					default:
						round[it.k] = it.v
					}
				case <-p.ctx.Done():
					yield(nil, p.ctx.Err())
					return
				}
			}
			if ended > 0 && ended < n && len(errs) == 0 {
				errs = append(errs, fmt.Errorf("%w: %d of %d shards ended", ErrUneven, ended, n))
			}
			if len(errs) > 0 {
				yield(nil, errors.Join(errs...))
				return
			}
			if ended == n {
				return
			}
			inYield = true
			more := yield(round, nil)
			inYield = false
			if !more {
				return
			}
			// Requested once the consumer is done with round r, so what it
			// sent meanwhile (new weights) comes before this round's items.
			for k := range n {
				p.request(k, out)
			}
		}
	}
}

// GatherAsync yields items as the shards produce them, keeping at most
// numAsync requests in flight per shard: when the consumer is done with
// shard k's item (pulls the next one), one more is requested from k. So
// GatherAsync never holds more than numAsync × Len() items that the
// consumer has not taken, however slow the consumer is. A message sent to
// shard k after one of its items was yielded runs before any item
// requested later. Items are taken in arrival order, so with several
// shards an item of a slow shard (a starved goroutine, a slow env) can
// wait behind any number of the others' items: GatherAsyncLag bounds that
// wait. The stream ends when every shard has ended and every item produced
// was yielded.
func GatherAsync[T any](p ParIter[T], numAsync int) Iter[T] {
	return gatherAsync(p, numAsync, -1)
}

// GatherAsyncLag is GatherAsync with a bound on lag: no item is yielded
// after more than maxLag other items were yielded since it was requested.
// Items come in arrival order until taking another than the oldest
// request outstanding would leave some request unable to come within its
// bound; then GatherAsyncLag waits for the oldest (holding the others,
// still at most numAsync × Len()) before it yields anything else.
// When the consumer sends each shard new weights before its next request
// and learns once per item (TrainOneStep, ApplyGradients), an item's lag
// in weights versions is that count, so it is at most maxLag. The first
// requests all go out together, so maxLag must be at least numAsync ×
// Len() − 1 (an ErrConfig error, before anything runs, otherwise); 0 means
// that least bound, under which items come in the order they were
// requested.
func GatherAsyncLag[T any](p ParIter[T], numAsync, maxLag int) (Iter[T], error) {
	least := numAsync*len(p.shards) - 1
	if maxLag == 0 {
		maxLag = max(0, least)
	}
	if maxLag < least {
		return nil, fmt.Errorf("%w: max_policy_lag %d is below %d = num_async %d × %d workers − 1, the lag of the first requests", ErrConfig, maxLag, least, numAsync, len(p.shards))
	}
	return gatherAsync(p, numAsync, maxLag), nil
}

// gatherAsync is GatherAsync, with a lag bound when maxLag ≥ 0.
func gatherAsync[T any](p ParIter[T], numAsync, maxLag int) Iter[T] {
	n := len(p.shards)
	out := make(chan item[T], n*numAsync)
	// pending[k]: when each of shard k's outstanding requests was made
	// (the items yielded by then), oldest first, as its actor runs them.
	var pending [][]stamp
	var arrived []held[T] // produced, not yet yielded, in arrival order
	var ended []bool
	yielded, inFlight, seq := 0, 0, 0
	asked, done := -1, false // asked: the shard of the item being consumed (−1: none)
	// receive takes a reply off out (blocking): an item joins arrived, an
	// ErrEnd ends its shard.
	receive := func(ctx context.Context) error {
		var it item[T]
		select {
		case it = <-out:
		case <-ctx.Done():
			return ctx.Err()
		}
		at := pending[it.k][0]
		pending[it.k] = pending[it.k][1:]
		switch {
		case errors.Is(it.err, ErrEnd):
			ended[it.k] = true
			inFlight--
		case it.err != nil:
			return fmt.Errorf("shard %d: %w", it.k, it.err)
		default:
			arrived = append(arrived, held[T]{K: it.k, At: at.At, Seq: at.Seq, V: it.v})
		}
		return nil
	}
	var restored *gatherState[T]
	registerGather(p, func(ctx context.Context) (gatherState[T], error) {
		if done || asked < 0 {
			return gatherState[T]{Yielded: yielded, Done: true}, nil
		}
		// Wait for every request: what arrives is what the loop would
		// have received, in the same order.
		for {
			waiting := 0
			for _, q := range pending {
				waiting += len(q)
			}
			if waiting == 0 {
				break
			}
			if err := receive(ctx); err != nil {
				return gatherState[T]{}, err
			}
		}
		return gatherState[T]{Yielded: yielded + 1, InFlight: inFlight, Seq: seq, Pending: pending, Ended: ended, Asked: asked, Items: arrived}, nil
	}, func(st gatherState[T]) error {
		if !st.Done && (len(st.Pending) != n || len(st.Ended) != n || st.Asked < 0 || st.Asked >= n) {
			return fmt.Errorf("%w: a gather's state of %d shards, this one has %d", trainstate.ErrCorrupt, len(st.Pending), n)
		}
		// Saved with every request answered: the held items are all
		// that is in flight.
		for _, q := range st.Pending {
			if len(q) > 0 {
				return fmt.Errorf("%w: a gather's state with requests unanswered", trainstate.ErrCorrupt)
			}
		}
		if !st.Done && st.InFlight != len(st.Items) {
			return fmt.Errorf("%w: a gather's state counts %d items in flight and holds %d", trainstate.ErrCorrupt, st.InFlight, len(st.Items))
		}
		for _, h := range st.Items {
			if h.K < 0 || h.K >= n {
				return fmt.Errorf("%w: a gather's held item of shard %d of %d", trainstate.ErrCorrupt, h.K, n)
			}
		}
		restored = &st
		return nil
	})
	return func(yield func(T, error) bool) {
		var zero T
		if numAsync < 1 {
			yield(zero, fmt.Errorf("flow: GatherAsync: numAsync %d must be ≥ 1", numAsync))
			return
		}
		defer func() { done = true }()
		pending, ended, arrived = make([][]stamp, n), make([]bool, n), nil
		yielded, inFlight, seq = 0, 0, 0
		var stamps []int
		ask := func(k int) {
			p.request(k, out)
			pending[k] = append(pending[k], stamp{At: yielded, Seq: seq})
			inFlight++
			seq++
		}
		if st := restored; st != nil && !st.Done {
			// Resumed inside the consumer's item of shard st.Asked: what
			// was requested is held, and the item's replacement is asked
			// for as the consumer left it.
			if len(st.Pending) == n && len(st.Ended) == n {
				copy(pending, st.Pending)
				copy(ended, st.Ended)
			}
			yielded, inFlight, seq, arrived = st.Yielded, st.InFlight, st.Seq, st.Items
			if !ended[st.Asked] {
				ask(st.Asked)
			}
		} else {
			if st != nil {
				yielded, seq = st.Yielded, st.Seq
			}
			for k := range n {
				for range numAsync {
					ask(k)
				}
			}
		}
		for inFlight > 0 {
			// Whether anything but the oldest request would make some
			// request late: the j-th oldest (from 0) is yielded at the
			// earliest j + 1 items from now, so its wait must allow that.
			// Requests made together (the first ones) are told apart by
			// the order they were made in, never by arrival.
			oldest, at := -1, stamp{At: math.MaxInt} // oldest: its index in arrived, or −1 if not arrived
			forced := false
			if maxLag >= 0 {
				stamps = stamps[:0]
				for i, h := range arrived {
					stamps = append(stamps, h.At)
					if s := (stamp{At: h.At, Seq: h.Seq}); s.before(at) {
						oldest, at = i, s
					}
				}
				for _, q := range pending {
					for _, s := range q {
						stamps = append(stamps, s.At)
					}
					if len(q) > 0 && q[0].before(at) {
						oldest, at = -1, q[0]
					}
				}
				slices.Sort(stamps)
				for j, a := range stamps {
					if yielded-a >= maxLag-j {
						forced = true
						break
					}
				}
			}
			pick := -1
			switch {
			case forced && oldest >= 0:
				pick = oldest
			case !forced && len(arrived) > 0:
				pick = 0
			}
			if pick < 0 {
				if err := receive(p.ctx); err != nil {
					yield(zero, err)
					return
				}
				continue
			}
			h := arrived[pick]
			arrived = append(arrived[:pick], arrived[pick+1:]...)
			inFlight--
			asked = h.K
			more := yield(h.V, nil)
			asked = -1
			if !more {
				return
			}
			yielded++
			// The replacement is asked for once the consumer is done with
			// the item, so what it sent meanwhile (new weights) comes first.
			if !ended[h.K] {
				ask(h.K)
			}
		}
	}
}

// stamp is when a request was made: the items yielded by then, and its
// number among all requests.
type stamp struct{ At, Seq int }

func (s stamp) before(o stamp) bool { return s.At < o.At || s.At == o.At && s.Seq < o.Seq }
