package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
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

// incSeq is one (incarnation, highest sequence number) entry; seq 0:
// unused. restored marks an entry read from a checkpoint (restore) that
// no push has moved since: the first number past it tells how many
// samples an earlier learner acknowledged after that checkpoint.
type incSeq struct {
	inc, seq uint64
	restored bool
}

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

// add records id as queued. It returns the sequence numbers skipped
// between a restored entry and id (see restore), 0 otherwise.
func (s *seenSamples) add(id SampleID) (skipped uint64) {
	if id.Seq == 0 {
		return 0
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
			if x.restored && id.Seq > x.seq+1 {
				skipped = id.Seq - x.seq - 1
			}
			e[i] = incSeq{inc: x.inc, seq: max(x.seq, id.Seq)}
			return skipped
		}
		if x.seq == 0 || (e[oldest].seq > 0 && x.inc < e[oldest].inc) {
			oldest = i
		}
	}
	e[oldest] = incSeq{inc: id.Incarnation, seq: id.Seq}
	return 0
}

// marshal encodes every entry: per entry the slot, the incarnation and
// the sequence number (uvarints), in slot order.
func (s *seenSamples) marshal() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	slots := make([]int, 0, len(s.slots))
	for k := range s.slots {
		slots = append(slots, k)
	}
	slices.Sort(slots)
	b := []byte(dedupMagic)
	for _, k := range slots {
		for _, x := range s.slots[k] {
			if x.seq > 0 {
				b = binary.AppendUvarint(b, uint64(k))
				b = binary.AppendUvarint(b, x.inc)
				b = binary.AppendUvarint(b, x.seq)
			}
		}
	}
	return b
}

// dedupMagic starts marshal's encoding.
const dedupMagic = "herd-dedup-1\n"

// restore replaces the entries by those of b (marshal's encoding), each
// marked restored.
func (s *seenSamples) restore(b []byte) error {
	rest, ok := bytes.CutPrefix(b, []byte(dedupMagic))
	if !ok {
		return fmt.Errorf("%w: not a dedup window", ErrMalformed)
	}
	slots := map[int]*[keepIncarnations]incSeq{}
	for len(rest) > 0 {
		var v [3]uint64
		for i := range v {
			x, n := binary.Uvarint(rest)
			if n <= 0 {
				return fmt.Errorf("%w: a dedup window cut short", ErrMalformed)
			}
			v[i], rest = x, rest[n:]
		}
		if v[0] > maxSlots || v[2] == 0 {
			return fmt.Errorf("%w: dedup entry slot %d, sequence %d", ErrMalformed, v[0], v[2])
		}
		e := slots[int(v[0])]
		if e == nil {
			e = new([keepIncarnations]incSeq)
			slots[int(v[0])] = e
		}
		i := slices.IndexFunc(e[:], func(x incSeq) bool { return x.seq == 0 })
		if i < 0 {
			return fmt.Errorf("%w: more than %d incarnations of slot %d in a dedup window", ErrMalformed, keepIncarnations, v[0])
		}
		e[i] = incSeq{inc: v[1], seq: v[2], restored: true}
	}
	s.mu.Lock()
	s.slots = slots
	s.mu.Unlock()
	return nil
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
