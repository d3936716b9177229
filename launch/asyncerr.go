package launch

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// asyncErrorEvery is how often one kind of asynchronous NATS error is
// printed: while a server is away, each subscription's missed heartbeats
// repeat the same error every few seconds, and a worker has dozens.
const asyncErrorEvery = time.Minute

// asyncErrors prints a process's asynchronous NATS errors (nats.go's
// ErrorHandler, which by default prints every one) once per
// asyncErrorEvery for each message, with the count of those held back
// since, so that a NATS outage is reported without flooding stderr.
type asyncErrors struct {
	w   io.Writer
	now func() time.Time

	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

func newAsyncErrors(w io.Writer) *asyncErrors {
	return &asyncErrors{w: w, now: time.Now, last: map[string]time.Time{}, held: map[string]int{}}
}

// handle is a nats.ErrHandler.
func (a *asyncErrors) handle(_ *nats.Conn, sub *nats.Subscription, err error) {
	key := err.Error()
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if t, ok := a.last[key]; ok && now.Sub(t) < asyncErrorEvery {
		a.held[key]++
		return
	}
	msg := "nats: " + key
	if sub != nil {
		msg += fmt.Sprintf(" (subscription on %q)", sub.Subject)
	}
	if n := a.held[key]; n > 0 {
		msg += fmt.Sprintf("; %d more like it since %s", n, a.last[key].Format(time.TimeOnly))
	}
	a.last[key], a.held[key] = now, 0
	fmt.Fprintln(a.w, msg)
}
