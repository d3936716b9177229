// Package taskq is replay/persist's two-level task queue: a p0 queue (push,
// delete, snapshot: what callers wait on or read back) and a p1 queue
// (evict, populate: housekeeping). One consumer takes p0 with probability
// P0 when both hold work, so housekeeping is slowed but never starved.
//
// # Protocol
//
// Producers call Reserve (which applies back-pressure) and then Put, which
// never blocks. Splitting the two lets a producer hold its own lock across
// Put, so tasks enter the queue in the order the producer numbered them,
// without ever blocking while holding that lock. Exactly one goroutine calls
// Next; it is the only reader of the random stream.
package taskq

import (
	"context"
	"errors"
	"math/rand/v2"
)

// ErrFull is returned by Reserve in non-blocking mode when the queue is full.
var ErrFull = errors.New("taskq: queue full")

// Priority names a queue.
type Priority int

const (
	P0 Priority = 0 // push, delete, snapshot
	P1 Priority = 1 // evict, populate
)

// Queue is a pair of bounded FIFO queues with a seeded, biased pick.
type Queue[T any] struct {
	q     [2]chan T
	slots [2]chan struct{} // capacity tokens; a token is held from Reserve until Next takes the task
	p0    float64
	r     *rand.Rand // owned by the consumer
}

// New returns a queue holding up to cap0 p0 tasks and cap1 p1 tasks, which
// prefers p0 with probability p0 when both have work, drawing from r.
func New[T any](cap0, cap1 int, p0 float64, r *rand.Rand) *Queue[T] {
	return &Queue[T]{
		q:     [2]chan T{make(chan T, cap0), make(chan T, cap1)},
		slots: [2]chan struct{}{make(chan struct{}, cap0), make(chan struct{}, cap1)},
		p0:    p0,
		r:     r,
	}
}

// Reserve takes room for one task in queue p. With block it waits for room
// or for ctx; otherwise it returns ErrFull at once when there is none.
func (q *Queue[T]) Reserve(ctx context.Context, p Priority, block bool) error {
	select {
	case q.slots[p] <- struct{}{}:
		return nil
	default:
	}
	if !block {
		return ErrFull
	}
	select {
	case q.slots[p] <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Put appends t to queue p. The caller must hold a reservation for p; Put
// then never blocks.
func (q *Queue[T]) Put(p Priority, t T) { q.q[p] <- t }

// Len reports the tasks waiting in queue p.
func (q *Queue[T]) Len(p Priority) int { return len(q.q[p]) }

// Next returns the next task and its queue, waiting until there is one or
// ctx is done. Only one goroutine may call Next.
func (q *Queue[T]) Next(ctx context.Context) (T, Priority, error) {
	// With a single consumer a non-empty channel cannot empty under us,
	// so the receives below do not block.
	if len(q.q[P0]) > 0 && len(q.q[P1]) > 0 {
		p := P1
		if q.r.Float64() < q.p0 {
			p = P0
		}
		return q.take(p), p, nil
	}
	select {
	case t := <-q.q[P0]:
		<-q.slots[P0]
		return t, P0, nil
	case t := <-q.q[P1]:
		<-q.slots[P1]
		return t, P1, nil
	case <-ctx.Done():
		var zero T
		return zero, P0, ctx.Err()
	}
}

func (q *Queue[T]) take(p Priority) T {
	t := <-q.q[p]
	<-q.slots[p]
	return t
}

// Release gives back a reservation that will not be used.
func (q *Queue[T]) Release(p Priority) { <-q.slots[p] }

// TryNext takes the next task of queue p without waiting; ok is false if
// the queue is empty. Only the consumer may call it. The consumer uses it
// to group consecutive writes into one batch.
func (q *Queue[T]) TryNext(p Priority) (t T, ok bool) {
	select {
	case t = <-q.q[p]:
		<-q.slots[p]
		return t, true
	default:
		return t, false
	}
}
