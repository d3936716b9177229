package persist

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"herd/replay/persist/internal/taskq"
)

// run is the worker: the only goroutine that changes the cache's contents
// or writes to Pebble. Because it is alone, a task sees no other mutation
// between its Pebble I/O (done outside mu) and its cache update (under mu).
func (s *Store) run(ctx context.Context) {
	defer close(s.workerD)
	for {
		t, _, err := s.q.Next(ctx)
		if err != nil {
			return
		}
		if s.handle(t) {
			return
		}
	}
}

// handle applies one task and reports whether it was the stop task.
func (s *Store) handle(t task) bool {
	var terr error
	switch t.kind {
	case taskPush:
		if s.batchWrites() {
			if next, ok := s.applyPushBatch(t); ok {
				return s.handle(next)
			}
			return false
		}
		terr = s.applyPush(t)
	case taskDelete:
		terr = s.applyDelete(t)
	case taskFlush:
		terr = s.flushDirty()
	case taskSnapshot:
		terr = s.captureSnapshot(t.snap)
	case taskEvict:
		terr = s.evictTo(s.lowWater)
		s.mu.Lock()
		s.mu.evictQd = false
		s.mu.Unlock()
	case taskPopulate:
		terr = s.populate(t)
	}
	s.finish(t, terr)
	return t.kind == taskStop
}

func (s *Store) finish(t task, terr error) {
	if terr != nil && t.kind != taskSnapshot {
		s.fail(terr)
	}
	s.metrics.observe(t.kind, t.enq)
	if t.done != nil {
		t.done <- terr
	}
}

// batchWrites reports whether pushes go to Pebble one by one, where
// grouping them into one batch (one WAL write, one sync) pays: Disk mode,
// and Hybrid in Sync mode (write-through).
func (s *Store) batchWrites() bool {
	return s.opts.Mode == Disk || (s.opts.Mode == Hybrid && s.opts.Durability == Sync)
}

// maxBatch bounds a group commit, in pushes and in bytes.
const (
	maxBatch      = 256
	maxBatchBytes = 16 << 20
)

// applyPushBatch takes first and every push queued right behind it (up to
// maxBatch) and commits them to Pebble as one batch, so a Sync store pays
// one WAL sync per group rather than per push (group commit). A non-push
// task met on the way is returned for the caller to handle next.
func (s *Store) applyPushBatch(first task) (next task, ok bool) {
	batch := append(s.pushBuf[:0], first)
	size := len(first.enc)
	for len(batch) < maxBatch && size < maxBatchBytes {
		t, got := s.q.TryNext(taskq.P0)
		if !got {
			break
		}
		if t.kind != taskPush {
			next, ok = t, true
			break
		}
		batch = append(batch, t)
		size += len(t.enc)
	}
	b := s.db.NewBatch()
	for _, t := range batch {
		_ = b.Set([]byte(t.key), t.enc, nil)
	}
	err := guardPebble(s.fatal, func() error { return b.Commit(s.wo) })
	b.Close()
	if err != nil {
		err = fmt.Errorf("persist: write batch of %d: %w", len(batch), err)
	}
	for _, t := range batch {
		terr := err
		if terr == nil {
			terr = s.installClean(t)
		}
		s.finish(t, terr)
	}
	clear(batch)
	s.pushBuf = batch[:0]
	return next, ok
}

// installClean finishes a push already written to Pebble: Disk mode drops
// any cached copy, Hybrid caches it clean (making room first).
func (s *Store) installClean(t task) error {
	e := &centry{key: t.key, enc: t.enc, voff: t.voff}
	if s.opts.Mode == Hybrid && e.size() <= s.limit {
		if err := s.makeRoom(e); err != nil {
			return err
		}
		s.mu.Lock()
		s.mu.cache.put(e)
		s.clearPendingLocked(t.key, t.seq)
		s.mu.Unlock()
		return nil
	}
	s.mu.Lock()
	if old := s.mu.cache.m[t.key]; old != nil {
		s.mu.cache.remove(old)
	}
	s.clearPendingLocked(t.key, t.seq)
	s.mu.Unlock()
	return nil
}

// makeRoom evicts until e fits within the limit (counting the entry e
// replaces as freed).
func (s *Store) makeRoom(e *centry) error {
	s.mu.Lock()
	var have int64
	if old := s.mu.cache.m[e.key]; old != nil {
		have = old.size()
	}
	over := s.mu.cache.bytes-have+e.size() > s.limit
	s.mu.Unlock()
	if !over {
		return nil
	}
	return s.evictTo(s.limit - e.size())
}

// fail records the first background error; later writes return it.
func (s *Store) fail(err error) {
	s.mu.Lock()
	if s.mu.bgErr == nil {
		s.mu.bgErr = fmt.Errorf("%w: %w", ErrBackground, err)
	}
	s.mu.Unlock()
}

// clearPendingLocked drops key's pending entry if it is still the write
// just applied; a newer write keeps its entry until its own task runs.
func (s *Store) clearPendingLocked(key string, seq uint64) {
	if p, ok := s.mu.pending[key]; ok && p.seq == seq {
		delete(s.mu.pending, key)
	}
}

func (s *Store) applyPush(t task) error {
	e := &centry{key: t.key, enc: t.enc, voff: t.voff, dirty: true}
	toDB := s.opts.Mode == Disk || (s.opts.Mode == Hybrid && (e.size() > s.limit || s.opts.Durability == Sync))
	if toDB {
		// Written before the cache changes and before the pending entry
		// goes, so a reader always finds the key somewhere.
		if err := guardPebble(s.fatal, func() error { return s.db.Set([]byte(t.key), t.enc, s.wo) }); err != nil {
			return fmt.Errorf("persist: write %q: %w", t.key, err)
		}
		e.dirty = false
	}
	if s.opts.Mode == Disk || e.size() > s.limit && s.opts.Mode == Hybrid {
		s.mu.Lock()
		if old := s.mu.cache.m[t.key]; old != nil {
			s.mu.cache.remove(old)
		}
		s.clearPendingLocked(t.key, t.seq)
		s.mu.Unlock()
		return nil
	}
	if s.opts.Mode == Hybrid {
		// Make room first, so the cache never holds more than its limit.
		if err := s.makeRoom(e); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.mu.cache.put(e)
	s.clearPendingLocked(t.key, t.seq)
	schedule := s.opts.Mode == Hybrid && s.mu.cache.bytes > s.highWater && !s.mu.evictQd
	if schedule {
		s.mu.evictQd = s.q.Reserve(context.Background(), taskq.P1, false) == nil
		schedule = s.mu.evictQd
	}
	s.mu.Unlock()
	if schedule {
		s.q.Put(taskq.P1, task{kind: taskEvict})
	}
	return nil
}

func (s *Store) applyDelete(t task) error {
	s.mu.Lock()
	if e := s.mu.cache.m[t.key]; e != nil {
		s.mu.cache.remove(e)
	}
	s.mu.Unlock()
	if s.db != nil {
		if err := guardPebble(s.fatal, func() error { return s.db.Delete([]byte(t.key), s.wo) }); err != nil {
			return fmt.Errorf("persist: delete %q: %w", t.key, err)
		}
	}
	s.mu.Lock()
	s.clearPendingLocked(t.key, t.seq)
	s.mu.Unlock()
	return nil
}

// evictTo writes least recently used entries to Pebble (dirty ones only;
// clean ones are there already) and then drops them from the cache, until
// the cache holds at most target bytes. Readers see each victim in the
// cache until it is in Pebble.
func (s *Store) evictTo(target int64) error {
	s.mu.Lock()
	if s.mu.cache.bytes <= target {
		s.mu.Unlock()
		return nil
	}
	s.victims = s.mu.cache.victims(s.victims[:0], target)
	s.mu.Unlock()
	b := s.db.NewBatch()
	for _, v := range s.victims {
		if v.dirty {
			if err := b.Set([]byte(v.key), v.enc, nil); err != nil {
				b.Close()
				return s.abortEvict(err)
			}
		}
	}
	if !b.Empty() {
		if err := guardPebble(s.fatal, func() error { return b.Commit(s.wo) }); err != nil {
			b.Close()
			return s.abortEvict(err)
		}
	}
	b.Close()
	s.mu.Lock()
	for _, v := range s.victims {
		if s.mu.cache.m[v.key] == v {
			s.mu.cache.remove(v)
		}
	}
	s.mu.Unlock()
	s.evictions.Add(int64(len(s.victims)))
	if s.metrics != nil {
		s.metrics.evictions.Add(float64(len(s.victims)))
	}
	clear(s.victims)
	return nil
}

func (s *Store) abortEvict(err error) error {
	s.mu.Lock()
	for _, v := range s.victims {
		v.evicting = false
	}
	s.mu.Unlock()
	clear(s.victims)
	return fmt.Errorf("persist: evict: %w", err)
}

// populate copies a cold key back into the cache (Hybrid) unless a newer
// write is pending or it is already cached.
func (s *Store) populate(t task) error {
	key := t.key
	s.mu.Lock()
	_, pending := s.mu.pending[key]
	cached := s.mu.cache.m[key] != nil
	fresh := s.mu.seq == t.seq
	s.mu.Unlock()
	if pending || cached {
		return nil
	}
	enc, voff := t.enc, t.voff
	if !fresh {
		// Some write was accepted after the reader's read: the copy it
		// carries may be stale, so read the current record.
		var err error
		if enc, voff, err = s.readDB(key); err != nil {
			return nil // gone, or unreadable: populating is only an optimisation
		}
	}
	e := &centry{key: key, enc: enc, voff: voff}
	if e.size() > s.limit {
		return nil
	}
	if err := s.evictTo(s.limit - e.size()); err != nil {
		return err
	}
	s.mu.Lock()
	if _, p := s.mu.pending[key]; !p && s.mu.cache.m[key] == nil {
		s.mu.cache.put(e)
	}
	s.mu.Unlock()
	s.populates.Add(1)
	if s.metrics != nil {
		s.metrics.populates.Inc()
	}
	return nil
}

// flushDirty writes every dirty cache entry to Pebble, marks it clean and
// syncs the WAL. Entries are written in batches of about 64 MiB so a large
// cache does not build one huge batch.
func (s *Store) flushDirty() error {
	if s.db == nil {
		return nil
	}
	var dirty []*centry
	s.mu.Lock()
	for e := s.mu.cache.head.next; e != &s.mu.cache.head; e = e.next {
		if e.dirty {
			dirty = append(dirty, e)
		}
	}
	s.mu.Unlock()
	for len(dirty) > 0 {
		b := s.db.NewBatch()
		n, size := 0, 0
		for ; n < len(dirty) && size < 64<<20; n++ {
			_ = b.Set([]byte(dirty[n].key), dirty[n].enc, nil)
			size += len(dirty[n].enc)
		}
		err := guardPebble(s.fatal, func() error { return b.Commit(pebble.NoSync) })
		b.Close()
		if err != nil {
			return fmt.Errorf("persist: flush: %w", err)
		}
		s.mu.Lock()
		for _, e := range dirty[:n] {
			e.dirty = false
		}
		s.mu.Unlock()
		dirty = dirty[n:]
	}
	if err := guardPebble(s.fatal, func() error { return s.db.LogData(nil, pebble.Sync) }); err != nil {
		return fmt.Errorf("persist: flush: sync wal: %w", err)
	}
	return nil
}
