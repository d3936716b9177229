package transport

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// SampleID names one pushed sample across every retry of its push: the
// env worker's slot, which start of that worker it is (its incarnation,
// from Membership.Resume; 0 when the worker does not track them) and its
// sequence number. Seq 0 means no id: such a push is never taken for a
// repeat. A pusher numbers its samples 1, 2, … and pushes them
// one after another, moving to the next only once the previous one was
// acknowledged, and retries a push with the same id.
type SampleID struct {
	Slot        int
	Incarnation uint64
	Seq         uint64
}

func (id SampleID) String() string {
	return strconv.Itoa(id.Slot) + "." + strconv.FormatUint(id.Incarnation, 10) + "." + strconv.FormatUint(id.Seq, 10)
}

// parseSampleID reads what String wrote.
func parseSampleID(s string) (SampleID, error) {
	var id SampleID
	a, rest, ok1 := strings.Cut(s, ".")
	b, c, ok2 := strings.Cut(rest, ".")
	slot, err1 := strconv.Atoi(a)
	inc, err2 := strconv.ParseUint(b, 10, 64)
	seq, err3 := strconv.ParseUint(c, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || err3 != nil || slot < 0 {
		return id, fmt.Errorf("%w: sample id %q", ErrMalformed, s)
	}
	return SampleID{Slot: slot, Incarnation: inc, Seq: seq}, nil
}

// keepIncarnations is how many incarnations per slot the learner
// remembers: a restarted worker's earlier starts may still have pushes in
// flight.
const keepIncarnations = 4

// maxSlots bounds the slots remembered; beyond it (a misconfigured or
// hostile peer inventing slots) one is forgotten for each new one.
const maxSlots = 1 << 16

// seenSamples remembers, for each (slot, incarnation), the highest
// sequence number queued. Since a pusher's sequence numbers reach a
// learner in order (one push in flight, retried under the same id until
// acknowledged, and a connection's messages arrive in the order sent), a
// sample is a repeat exactly when its number is at most that. Memory:
// keepIncarnations numbers per env worker slot, however long the run.
type seenSamples struct {
	mu    sync.Mutex
	slots map[int]*[keepIncarnations]incSeq
}

type incSeq struct{ inc, seq uint64 } // seq 0: unused

func newSeenSamples() *seenSamples { return &seenSamples{slots: map[int]*[keepIncarnations]incSeq{}} }

// seen reports whether id was recorded.
func (s *seenSamples) seen(id SampleID) bool {
	if id.Seq == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.slots[id.Slot]
	if e == nil {
		return false
	}
	for _, x := range e {
		if x.seq > 0 && x.inc == id.Incarnation {
			return id.Seq <= x.seq
		}
	}
	return false
}

// add records id as queued.
func (s *seenSamples) add(id SampleID) {
	if id.Seq == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.slots[id.Slot]
	if e == nil {
		if len(s.slots) >= maxSlots {
			for k := range s.slots {
				delete(s.slots, k)
				break
			}
		}
		e = new([keepIncarnations]incSeq)
		s.slots[id.Slot] = e
	}
	oldest := 0
	for i, x := range e {
		if x.seq > 0 && x.inc == id.Incarnation {
			e[i].seq = max(x.seq, id.Seq)
			return
		}
		if x.seq == 0 || (e[oldest].seq > 0 && x.inc < e[oldest].inc) {
			oldest = i
		}
	}
	e[oldest] = incSeq{inc: id.Incarnation, seq: id.Seq}
}

// size returns the number of (slot, incarnation) entries held.
func (s *seenSamples) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.slots {
		for _, x := range e {
			if x.seq > 0 {
				n++
			}
		}
	}
	return n
}
