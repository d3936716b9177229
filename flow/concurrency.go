package flow

import (
	"fmt"
	"iter"
	"sync"
)

// Split duplicates it into n iterators that each see every item, for
// consumers that run concurrently (UnionAsync, or goroutines of the
// caller's). Each copy buffers the items it has not taken yet, at most
// bound of them: a copy that would push another past its bound waits until
// that lagging copy has taken an item, so the lagging consumer is
// preferred and Split never holds more than bound items per copy. A copy
// that stops taking items (breaks out of its loop) releases its buffer and
// no longer holds the others back. Consumers on one goroutine must take
// items in an order that keeps every copy within bound (round-robin with
// bound ≥ 1 does), or the leader waits forever.
func Split[T any](it Iter[T], n, bound int) []Iter[T] {
	_, out := split(it, n, bound)
	return out
}

func split[T any](it Iter[T], n, bound int) (*splitter[T], []Iter[T]) {
	if bound < 1 {
		bound = 1
	}
	s := &splitter[T]{src: it, bufs: make([][]T, n), active: make([]bool, n), bound: bound}
	s.cond = sync.NewCond(&s.mu)
	for i := range s.active {
		s.active[i] = true
	}
	out := make([]Iter[T], n)
	for i := range out {
		out[i] = s.copy(i)
	}
	return s, out
}

type splitter[T any] struct {
	src     Iter[T]
	mu      sync.Mutex
	cond    *sync.Cond
	next    func() (T, error, bool) // iter.Pull2 of src, started by the first pull
	stop    func()
	pulling bool
	done    bool
	err     error
	bufs    [][]T
	active  []bool
	bound   int
	maxHeld int // the most items any copy buffered (for tests)
}

func (s *splitter[T]) copy(i int) Iter[T] {
	return func(yield func(T, error) bool) {
		defer s.release(i)
		for {
			x, err, ok := s.take(i)
			if !ok {
				return
			}
			if !yield(x, err) || err != nil {
				return
			}
		}
	}
}

// take returns copy i's next item, pulling the source when every copy's
// buffer has room.
func (s *splitter[T]) take(i int) (T, error, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	for {
		if len(s.bufs[i]) > 0 {
			x := s.bufs[i][0]
			s.bufs[i][0] = zero
			s.bufs[i] = s.bufs[i][1:]
			s.cond.Broadcast()
			return x, nil, true
		}
		if s.done {
			return zero, s.err, s.err != nil
		}
		if s.pulling || s.full(i) {
			s.cond.Wait()
			continue
		}
		if s.next == nil {
			s.next, s.stop = iter.Pull2(iter.Seq2[T, error](s.src))
		}
		s.pulling = true
		s.mu.Unlock()
		x, err, ok := s.next()
		s.mu.Lock()
		s.pulling = false
		s.cond.Broadcast()
		switch {
		case !ok:
			s.done = true
		case err != nil:
			s.done, s.err = true, err
		default:
			for j, a := range s.active {
				if a && j != i {
					s.bufs[j] = append(s.bufs[j], x)
					s.maxHeld = max(s.maxHeld, len(s.bufs[j]))
				}
			}
			return x, nil, true
		}
	}
}

// full reports whether another active copy has bound items waiting.
func (s *splitter[T]) full(i int) bool {
	for j, a := range s.active {
		if a && j != i && len(s.bufs[j]) >= s.bound {
			return true
		}
	}
	return false
}

// release marks copy i as stopped; the last one stops the source.
func (s *splitter[T]) release(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active[i], s.bufs[i] = false, nil
	s.cond.Broadcast()
	for _, a := range s.active {
		if a {
			return
		}
	}
	if s.stop != nil && !s.pulling {
		s.stop()
	}
}

// UnionRoundRobin interleaves its inputs one item each in turn, on the
// consumer's goroutine; an input that ends is skipped, and the union ends
// when all have ended. With synchronous inputs the order is fixed, so a
// plan that uses it stays deterministic.
func UnionRoundRobin[T any](its ...Iter[T]) Iter[T] {
	w := make([]int, len(its))
	for i := range w {
		w[i] = 1
	}
	return UnionWeighted(w, its...)
}

// UnionWeighted interleaves its inputs at a fixed ratio: per round it takes
// weights[i] items from input i, in input order (RLlib Flow's
// round_robin_weights; e.g. Ape-X's ratio of stored to replayed batches).
// An input that ends is skipped; the union ends when all have ended.
func UnionWeighted[T any](weights []int, its ...Iter[T]) Iter[T] {
	return func(yield func(T, error) bool) {
		var zero T
		if len(weights) != len(its) {
			yield(zero, fmt.Errorf("flow: UnionWeighted: %d weights for %d inputs", len(weights), len(its)))
			return
		}
		for i, w := range weights {
			if w < 1 {
				yield(zero, fmt.Errorf("flow: UnionWeighted: weight %d is %d, want ≥ 1", i, w))
				return
			}
		}
		nexts := make([]func() (T, error, bool), len(its))
		for i, it := range its {
			next, stop := iter.Pull2(iter.Seq2[T, error](it))
			defer stop()
			nexts[i] = next
		}
		live := len(its)
		for live > 0 {
			for i, next := range nexts {
				for k := 0; k < weights[i] && next != nil; k++ {
					x, err, ok := next()
					if !ok {
						nexts[i], next = nil, nil
						live--
						break
					}
					if !yield(x, err) || err != nil {
						return
					}
				}
			}
		}
	}
}

// UnionAsync runs each input on a goroutine of its own and yields items as
// they arrive (RLlib Flow's Concurrently(mode="async")): Ape-X's store and
// replay sub-flows progress side by side. Each input holds at most one
// item the consumer has not taken. The union ends when all inputs have
// ended; when the consumer stops early it waits for every input goroutine
// to finish the item it is computing.
func UnionAsync[T any](its ...Iter[T]) Iter[T] {
	return func(yield func(T, error) bool) {
		type msg struct {
			x   T
			err error
			end bool
		}
		ch := make(chan msg)
		quit := make(chan struct{})
		var wg sync.WaitGroup
		for _, it := range its {
			wg.Add(1)
			go func() {
				defer wg.Done()
				send := func(m msg) bool {
					select {
					case ch <- m:
						return true
					case <-quit:
						return false
					}
				}
				for x, err := range it {
					if !send(msg{x: x, err: err}) || err != nil {
						return
					}
				}
				send(msg{end: true})
			}()
		}
		defer wg.Wait()
		defer close(quit)
		for live := len(its); live > 0; {
			m := <-ch
			if m.end {
				live--
				continue
			}
			if !yield(m.x, m.err) || m.err != nil {
				return
			}
		}
	}
}
