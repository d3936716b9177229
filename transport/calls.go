package transport

import (
	"context"
	"fmt"
	"sync"
)

// CallStream carries a driver's calls to named actors and their replies
// (request-reply, addressed): package flow's shards whose actors live on
// workers. A driver makes one call at a time per actor and numbers them 1,
// 2, …; the actor runs each number once, in order, so a call sent after
// another is run after it (the ordering flow's barrier rests on), and a
// call repeated after a lost reply is answered from the actor's memory
// without running again: exactly once per call number.
type CallStream interface {
	// Call sends body to actor as call number seq and waits for the
	// reply. seq must be 1 for the first call and one more than the last
	// answered call afterwards; a call whose wait ended with an error may
	// be made again with the same seq, and the actor then answers it from
	// its memory without running it again (Stats.Duplicates, counted by
	// both the caller's and the actor's stream). ctx bounds
	// the wait, including the wait for the actor to appear. An error from
	// the actor's handler, or a refused call number, wraps ErrRejected.
	// The caller owns the returned bytes.
	Call(ctx context.Context, actor string, seq uint64, body []byte) ([]byte, error)
	// Serve runs actor's loop until ctx ends (it then returns nil) or the
	// stream closes (ErrClosed): h runs once per call number, in order,
	// and its reply or error answers the call. It remembers the last
	// call's number and reply only (the caller has one call in flight), and
	// refuses a call whose number is neither that one nor the next one
	// without running h. One Serve per actor name and run.
	Serve(ctx context.Context, actor string, h CallHandler) error
	// Stats returns the stream's counters.
	Stats() Stats
	// Close stops the stream; blocked calls return ErrClosed.
	Close() error
}

// CallHandler is an actor's handling of one call: body is valid only
// during the call; the returned bytes become the caller's.
type CallHandler func(ctx context.Context, seq uint64, body []byte) ([]byte, error)

// CallTransport is a Transport that also carries actor calls (Inproc and
// NATS are; find it by type assertion).
type CallTransport interface {
	Calls(ctx context.Context, run string, opt Options) (CallStream, error)
}

// callMemory is an actor's memory of its last call: the exactly-once rule
// both implementations share.
type callMemory struct {
	mu    sync.Mutex
	last  uint64 // number of the last call run (0: none)
	reply []byte
	err   string
}

// handle runs h for call seq when it is the next one and returns its
// reply (or its error's text), answers a repeat of the last call from
// memory (dup true), and refuses any other number. Calls on one memory
// run one at a time.
func (m *callMemory) handle(ctx context.Context, seq uint64, body []byte, h CallHandler) (reply []byte, errText string, dup bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch seq {
	case m.last:
		if seq != 0 {
			return m.reply, m.err, true
		}
	case m.last + 1:
		b, err := h(ctx, seq, body)
		m.last, m.reply, m.err = seq, b, ""
		if err != nil {
			m.reply, m.err = nil, err.Error()
		}
		return m.reply, m.err, false
	}
	return nil, fmt.Sprintf("call %d out of order: the actor's last call is %d", seq, m.last), false
}

// checkCall validates a call's actor name and number.
func checkCall(actor string, seq uint64) error {
	if err := checkName("actor", actor); err != nil {
		return err
	}
	if seq == 0 {
		return fmt.Errorf("%w: call numbers start at 1", ErrBadRequest)
	}
	return nil
}
