package flow

import (
	"errors"
	"iter"
)

// ErrEnd ends a shard's stream: a shard's Next returns it when it has no
// more items (its step budget is spent). It never reaches a consumer.
var ErrEnd = errors.New("flow: end of stream")

// Iter is a lazy sequential stream: nothing runs until a consumer pulls
// (ranges over it). An item comes with an error; an iterator yields at most
// one non-nil error, as its last item, so a consumer stops at the first
// error it sees. Iterators run on the goroutine that pulls them, unless an
// operator says otherwise (UnionAsync).
type Iter[T any] iter.Seq2[T, error]

// FromSlice returns an Iter over xs (tests, fixed schedules).
func FromSlice[T any](xs []T) Iter[T] {
	return func(yield func(T, error) bool) {
		for _, x := range xs {
			if !yield(x, nil) {
				return
			}
		}
	}
}

// ForEach applies f to every item of it, on the consumer's goroutine; an
// error from f ends the stream with that error.
func ForEach[T, U any](it Iter[T], f func(T) (U, error)) Iter[U] {
	return func(yield func(U, error) bool) {
		for x, err := range it {
			var u U
			if err == nil {
				u, err = f(x)
			}
			if !yield(u, err) || err != nil {
				return
			}
		}
	}
}

// Filter keeps the items for which keep is true.
func Filter[T any](it Iter[T], keep func(T) bool) Iter[T] {
	return func(yield func(T, error) bool) {
		for x, err := range it {
			if err != nil || keep(x) {
				if !yield(x, err) || err != nil {
					return
				}
			}
		}
	}
}

// Flatten yields the elements of every slice of it, in order.
func Flatten[T any](it Iter[[]T]) Iter[T] {
	return func(yield func(T, error) bool) {
		for xs, err := range it {
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, x := range xs {
				if !yield(x, nil) {
					return
				}
			}
		}
	}
}

// Combine collects items until size(collected) reaches at least min, then
// yields them as one slice (RLlib Flow's combine(ConcatBatches(min))). Items
// left over when the stream ends are yielded as a last, shorter slice, so
// nothing is dropped.
func Combine[T any](it Iter[T], min int, size func(T) int) Iter[[]T] {
	return func(yield func([]T, error) bool) {
		var buf []T
		n := 0
		for x, err := range it {
			if err != nil {
				yield(nil, err)
				return
			}
			buf = append(buf, x)
			if n += size(x); n >= min {
				if !yield(buf, nil) {
					return
				}
				buf, n = nil, 0
			}
		}
		if len(buf) > 0 {
			yield(buf, nil)
		}
	}
}

// Select keeps the items whose policy id (as read by id) is one of ids: a
// multi-agent plan's split of one experience stream into per-policy
// streams (RLlib Flow's select_experiences).
func Select[T any](it Iter[T], id func(T) string, ids ...string) Iter[T] {
	want := make(map[string]bool, len(ids))
	for _, s := range ids {
		want[s] = true
	}
	return Filter(it, func(x T) bool { return want[id(x)] })
}
