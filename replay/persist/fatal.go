package persist

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
)

// ErrDiskFull marks a write refused or failed because the store's disk is
// full. The store then refuses every write (the service answers
// RESOURCE_EXHAUSTED); records acknowledged before stay as durable as the
// durability mode promised.
var ErrDiskFull = errors.New("persist: disk full")

// fatalError is what Pebble reported through Logger.Fatalf: Pebble cannot
// go on with this database (a WAL or MANIFEST write failed). cause is the
// first error among Fatalf's arguments, so errors.Is finds ENOSPC.
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return "persist: pebble cannot continue: " + e.msg }
func (e *fatalError) Unwrap() []error {
	errs := []error{ErrBackground}
	if e.cause != nil {
		errs = append(errs, e.cause)
		if errors.Is(e.cause, syscall.ENOSPC) {
			errs = append(errs, ErrDiskFull)
		}
	}
	return errs
}

// fatalPanic carries a fatalError from Fatalf up to guardPebble.
type fatalPanic struct{ err error }

// fatalState records the first fatal error of a store's Pebble.
type fatalState struct {
	once sync.Once
	err  error
	ch   chan struct{}
	// onFatal tells the store (which then refuses writes).
	onFatal func(error)
}

func newFatalState(onFatal func(error)) *fatalState {
	return &fatalState{ch: make(chan struct{}), onFatal: onFatal}
}

func (f *fatalState) set(err error) {
	f.once.Do(func() {
		f.err = err
		if f.onFatal != nil {
			f.onFatal(err)
		}
		close(f.ch)
	})
}

// failed reports whether Pebble hit a fatal error.
func (f *fatalState) failed() bool {
	select {
	case <-f.ch:
		return true
	default:
		return false
	}
}

// pebbleLogger keeps Pebble's informational lines off stderr and turns its
// Fatalf, which must not return, into an error: inside guardPebble (every
// call the store makes into Pebble) it unwinds to the guard, which returns
// the error; in one of Pebble's own goroutines (a flush or compaction) it
// parks that goroutine for good, since Pebble cannot continue, after
// marking the store failed so that its owner stops it (Close then leaves
// Pebble alone). Either way the process does not panic.
type pebbleLogger struct{ fatal *fatalState }

func (pebbleLogger) Infof(string, ...any)  {}
func (pebbleLogger) Errorf(string, ...any) {}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	e := &fatalError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			e.cause = err
			break
		}
	}
	l.fatal.set(e)
	buf := make([]byte, 64<<10)
	if bytes.Contains(buf[:runtime.Stack(buf, false)], []byte(guardName)) {
		panic(fatalPanic{e})
	}
	select {}
}

// guardName is how guardPebble appears in a stack trace.
const guardName = "persist.guardPebble("

// guardPebble calls f, turning a Pebble Fatalf inside it into f's error,
// and so the panic with which Pebble reports a failed log write without
// sync (an error value, not a runtime error): Pebble cannot continue after
// either, so the store is marked failed as by Fatalf.
//
// Once Pebble failed, guardPebble no longer calls f: Pebble's write path
// may hold a lock for good, and every write would wait on it.
func guardPebble(fatal *fatalState, f func() error) (err error) {
	if fatal.failed() {
		return fatal.err
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if fp, ok := r.(fatalPanic); ok {
			err = fp.err
			return
		}
		perr, ok := r.(error)
		var rerr runtime.Error
		if !ok || errors.As(perr, &rerr) {
			panic(r)
		}
		fe := &fatalError{msg: perr.Error(), cause: perr}
		fatal.set(fe)
		err = fe
	}()
	return f()
}

// Failed returns a channel closed once the store's Pebble database hit an
// error it cannot continue from (a full disk while writing its log, for
// one); Err then says what. The store refuses writes from then on, and its
// owner should stop serving and Close it.
func (s *Store) Failed() <-chan struct{} { return s.fatal.ch }

// Err returns the error that stopped the store's writes, or nil.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.bgErr
}
