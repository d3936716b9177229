package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/internal/rng"
	"herd/replay/persist/blobstore"
	"herd/replay/persist/internal/durable"
	"herd/replay/persist/internal/taskq"
)

// Store is a key → Record store with a hot LRU cache over a cold Pebble
// store, an asynchronous task processor, a pending index that makes every
// write visible to the writer at once, plugin samplers and snapshots. See
// doc.go for the guide.
//
// All methods are safe for concurrent use. Lock order: Store.snapMu before
// Store.mu; nothing is acquired while holding mu, and no I/O happens under
// mu (Pebble reads and writes, uploads and checkpoints run outside it).
type Store struct {
	opts  Options
	db    *pebble.DB // nil in Memory mode
	fatal *fatalState
	// restored is set by a restore (Options.RestoreFrom) before the
	// worker starts, and read-only afterwards.
	restored RestoreInfo
	wo       *pebble.WriteOptions
	q        *taskq.Queue[task]
	metrics  *metrics

	limit     int64 // cache byte limit (Hybrid)
	highWater int64 // cache bytes that schedule a p1 evict
	lowWater  int64 // what a p1 evict brings the cache down to

	samplerIdx map[string]int // name → index in mu.samplers; immutable after Open

	mu struct {
		sync.Mutex
		seq      uint64              // numbers accepted writes
		pending  map[string]pend     // latest accepted, not yet applied write per key
		live     map[string]struct{} // keys present, pending writes included
		cache    lru
		samplers []*samplerSlot
		closed   bool
		bgErr    error // first failed background write; sticky
		evictQd  bool  // a p1 evict task is queued
	}

	// Owned by the worker goroutine.
	victims []*centry
	pushBuf []task

	snapMu   sync.Mutex // one snapshot at a time; guards the fields below
	bucket   blobstore.Bucket
	snapNext uint64             // next snapshot id; 0 = not yet listed
	uploaded map[string]fileRef // checkpoint sstable name → its object, uploaded earlier
	checked  map[string]bool    // object → intact in the bucket; reset by every snapshot

	evictions, populates atomic.Int64
	// cacheHits counts reads (Get, Sample) served from memory (the cache
	// or pending writes), cacheMisses those read from Pebble.
	cacheHits, cacheMisses atomic.Int64
	snapErr                atomic.Pointer[error] // last automatic snapshot error

	cancel      context.CancelFunc // stops the worker (only after its stop task, or on a failed Open)
	timerCancel context.CancelFunc // stops the snapshot timer
	workerD     chan struct{}      // closed when the worker exits
	timerWG     sync.WaitGroup
	closeMu     sync.Mutex
}

type pend struct {
	seq  uint64
	enc  []byte // encoded record; nil means deleted
	voff int
}

type samplerSlot struct {
	s    Sampler
	src  *rand.PCG
	r    *rand.Rand
	keys []string // scratch for Sample
}

type taskKind uint8

const (
	taskPush taskKind = iota
	taskDelete
	taskFlush
	taskSnapshot
	taskEvict
	taskPopulate
	taskStop
	taskWait
	numTaskKinds
)

func (k taskKind) String() string {
	return [...]string{"push", "delete", "flush", "snapshot", "evict", "populate", "stop", "wait"}[k]
}

// task is one unit of work for the worker; passed by value, so queueing a
// push allocates nothing beyond the encoded record.
type task struct {
	kind taskKind
	key  string
	enc  []byte
	voff int
	seq  uint64
	enq  time.Time // zero when metrics are off
	done chan error
	snap *snapCapture
}

// Item is one sampled record. Value aliases store memory when it came from
// the cache or the pending index: treat it as read-only.
type Item struct {
	Key   string
	Value []byte
}

// Stats is a point-in-time view for tests, benchmarks and metrics.
type Stats struct {
	Len           int
	Pending       int
	CacheEntries  int
	CacheBytes    int64
	MaxCacheBytes int64 // high-water mark since Open
	CacheLimit    int64
	Evictions     int64
	Populates     int64
	// CacheHits counts records read (Get, Sample) from memory: the cache
	// or writes not yet applied; CacheMisses those read from Pebble.
	CacheHits   int64
	CacheMisses int64
	QueueP0     int
	QueueP1     int
}

// Open opens (or creates) a store, restoring from opts.RestoreFrom when set,
// and starts its worker (and its snapshot timer when SnapshotURL is set).
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, samplerIdx: map[string]int{}, uploaded: map[string]fileRef{},
		workerD: make(chan struct{})}
	s.fatal = newFatalState(s.fail)
	s.wo = pebble.NoSync
	if opts.Durability == Sync {
		s.wo = pebble.Sync
	}
	s.limit = int64(opts.CacheMB) << 20
	s.highWater = s.limit - s.limit/10
	s.lowWater = s.limit - s.limit/5
	s.mu.pending = map[string]pend{}
	s.mu.live = map[string]struct{}{}
	s.mu.cache.init()
	for i, sm := range opts.Samplers {
		src := rng.Source(opts.Seed, "persist/sampler/"+sm.Name(), 0)
		s.mu.samplers = append(s.mu.samplers, &samplerSlot{s: sm, src: src, r: rand.New(src)})
		s.samplerIdx[sm.Name()] = i
	}
	s.q = taskq.New[task](opts.QueueP0, opts.QueueP1, opts.P0Prob, rng.New(opts.Seed, "persist/taskq", 0))

	ok := false
	defer func() {
		if !ok {
			s.closeResources()
		}
	}()
	if opts.SnapshotURL != "" {
		b, err := blobstore.Open(ctx, opts.SnapshotURL)
		if err != nil {
			return nil, fmt.Errorf("persist: snapshot url: %w", err)
		}
		s.bucket = b
	}
	restored := map[string]bool{} // samplers whose state came from a snapshot
	if opts.RestoreFrom != "" {
		from := s.bucket
		if opts.RestoreFrom != opts.SnapshotURL {
			var err error
			if from, err = blobstore.Open(ctx, opts.RestoreFrom); err != nil {
				return nil, fmt.Errorf("persist: restore url: %w", err)
			}
			defer from.Close()
		}
		m, err := s.pickManifest(ctx, from)
		if err != nil {
			return nil, err
		}
		if opts.Mode == Memory {
			restored, err = s.restoreMemory(ctx, from, m)
		} else {
			restored, err = s.restoreDisk(ctx, from, m)
		}
		if err != nil {
			return nil, err
		}
	}
	if opts.Mode != Memory {
		if err := s.openDB(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.load(restored); err != nil {
		return nil, err
	}
	var err error
	if s.metrics, err = newMetrics(opts.Registerer, s); err != nil {
		return nil, fmt.Errorf("persist: metrics: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(wctx)
	tctx, tcancel := context.WithCancel(context.Background())
	s.timerCancel = tcancel
	if s.bucket != nil && opts.SnapshotEvery > 0 {
		s.timerWG.Add(1)
		go s.snapshotTimer(tctx)
	}
	ok = true
	return s, nil
}

func (s *Store) logger() *slog.Logger {
	if s.opts.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.opts.Logger
}

func (s *Store) dbDir() string { return s.opts.FS.PathJoin(s.opts.Dir, "db") }

// restoreDir is where a restore builds the store before renaming it to
// dbDir: beside it, in Dir, so the rename never crosses filesystems.
func (s *Store) restoreDir() string { return s.opts.FS.PathJoin(s.opts.Dir, "db.restore") }

func (s *Store) openDB(ctx context.Context) error {
	// An incomplete restore left by a crash was never served; drop it.
	if err := s.opts.FS.RemoveAll(s.restoreDir()); err != nil {
		return fmt.Errorf("persist: remove incomplete restore: %w", err)
	}
	if err := durable.MkdirAll(s.opts.FS, s.dbDir()); err != nil {
		return fmt.Errorf("persist: %w", err)
	}
	db, err := openPebble(ctx, s.opts.FS, s.dbDir(), s.opts.PebbleCacheMB, s.fatal)
	if err != nil {
		return err
	}
	s.db = db
	return nil
}

// openPebble opens the Pebble database in dir. Pebble's Open waits for the
// flush of the log it replays, and retries a flush that fails for good
// (a full disk) without end; so Open runs in a goroutine of its own, and
// openPebble returns at the first background error that says the disk is
// full, at a fatal error, or when ctx ends, abandoning that goroutine (the
// process is expected to exit: the database directory stays locked by it).
func openPebble(ctx context.Context, fs vfs.FS, dir string, cacheMB int, fatal *fatalState) (*pebble.DB, error) {
	cache := pebble.NewCache(int64(cacheMB) << 20)
	defer cache.Unref()
	full := make(chan error, 1)
	opts := &pebble.Options{
		FS:           fs,
		Cache:        cache,
		MemTableSize: 64 << 20,
		Logger:       pebbleLogger{fatal},
		EventListener: &pebble.EventListener{BackgroundError: func(err error) {
			if errors.Is(err, syscall.ENOSPC) {
				select {
				case full <- err:
				default:
				}
			}
		}},
	}
	type result struct {
		db  *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = guardPebble(fatal, func() (err error) { r.db, err = pebble.Open(dir, opts); return err })
		done <- r
	}()
	var err error
	select {
	case r := <-done:
		if r.err == nil {
			return r.db, nil
		}
		err = r.err
	case ferr := <-full:
		err = fmt.Errorf("%w: %w", ErrDiskFull, ferr)
	case <-fatal.ch:
		err = fatal.err
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	return nil, fmt.Errorf("persist: open pebble %s: %w", dir, err)
}

// quietLogger keeps Pebble's informational lines off stderr; errors still
// reach the caller through returned errors. It serves the in-memory Pebble
// of a restore check; the store's own uses pebbleLogger.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("persist: pebble fatal: "+format, args...))
}

// load fills the live set from Pebble and builds the index of every
// sampler whose state was not restored from a snapshot. It runs before the
// worker starts.
func (s *Store) load(restored map[string]bool) error {
	if s.db != nil {
		it, err := s.db.NewIter(nil)
		if err != nil {
			return fmt.Errorf("persist: scan: %w", err)
		}
		for it.First(); it.Valid(); it.Next() {
			s.mu.live[string(it.Key())] = struct{}{}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("persist: scan: %w", err)
		}
	}
	var need []*samplerSlot
	for _, sl := range s.mu.samplers {
		if !restored[sl.s.Name()] {
			need = append(need, sl)
		}
	}
	if len(need) == 0 || len(s.mu.live) == 0 {
		return nil
	}
	// Rebuild the remaining indexes in key order, so that the same data
	// always gives the same sampler state.
	keys := make([]string, 0, len(s.mu.live))
	for k := range s.mu.live {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Samplers that declare no fields (Uniform) need only the keys; skip
	// reading the values then.
	needFields := false
	for _, sl := range need {
		needFields = needFields || len(sl.s.Fields()) > 0
	}
	fields := map[string]float64{}
	for _, k := range keys {
		if !needFields {
			for _, sl := range need {
				sl.s.BuildIndex(k, nil)
			}
			continue
		}
		enc, _, err := s.lookupCold(k)
		if err != nil {
			return fmt.Errorf("persist: rebuild index at %q: %w", k, err)
		}
		clear(fields)
		if _, err := walkFields(enc, func(n []byte, v float64) { fields[string(n)] = v }); err != nil {
			return fmt.Errorf("persist: rebuild index at %q: %w", k, err)
		}
		for _, sl := range need {
			if err := sl.s.Check(fields); err != nil {
				return fmt.Errorf("persist: rebuild index at %q: %w", k, err)
			}
			sl.s.BuildIndex(k, fields)
		}
	}
	return nil
}

// lookupCold reads key from the cache or Pebble without touching recency;
// used only before the worker starts.
func (s *Store) lookupCold(key string) ([]byte, int, error) {
	if e := s.mu.cache.m[key]; e != nil {
		return e.enc, e.voff, nil
	}
	return s.readDB(key)
}

// readDB copies key's record out of Pebble.
func (s *Store) readDB(key string) ([]byte, int, error) {
	if s.db == nil {
		return nil, 0, ErrNotFound
	}
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("persist: read %q: %w", key, err)
	}
	enc := append([]byte(nil), v...)
	_ = closer.Close()
	voff, err := valueOffset(enc)
	if err != nil {
		return nil, 0, fmt.Errorf("persist: read %q: %w", key, err)
	}
	return enc, voff, nil
}

// Push stores rec under key. In WriteBack mode it returns once the write is
// queued (and visible to Get and Sample); in Sync mode once it is in Pebble
// with the WAL synced. It blocks while the p0 queue is full (until ctx is
// done), or returns ErrQueueFull under QueueFullError. The store copies
// rec; the caller may reuse it.
func (s *Store) Push(ctx context.Context, key string, rec Record) error {
	if key == "" {
		return ErrEmptyKey
	}
	if len(rec.Value) > s.opts.MaxValueBytes {
		return fmt.Errorf("%w: %q has %d bytes, limit %d", ErrTooLarge, key, len(rec.Value), s.opts.MaxValueBytes)
	}
	for _, sl := range s.mu.samplers { // the slice is immutable; Check needs no lock
		if err := sl.s.Check(rec.Fields); err != nil {
			return fmt.Errorf("persist: push %q: %w", key, err)
		}
	}
	enc := encodeRecord(rec)
	return s.submit(ctx, task{kind: taskPush, key: key, enc: enc, voff: len(enc) - len(rec.Value)}, rec.Fields)
}

// Delete removes key; it returns ErrNotFound if key is absent (pending
// writes included). Like Push, it returns once queued (Sync: once applied).
func (s *Store) Delete(ctx context.Context, key string) error {
	if key == "" {
		return ErrEmptyKey
	}
	return s.submit(ctx, task{kind: taskDelete, key: key}, nil)
}

// submit reserves queue room, then, under mu, numbers the write, records it
// in the pending index and the samplers, and queues it. Queueing under mu
// keeps queue order equal to numbering order, so the worker applies writes
// to one key in the order callers made them; Reserve first means Put never
// blocks while mu is held.
func (s *Store) submit(ctx context.Context, t task, fields map[string]float64) error {
	if err := s.reserve(ctx); err != nil {
		return err
	}
	var done chan error
	if s.opts.Durability == Sync {
		done = make(chan error, 1)
		t.done = done
	}
	if s.metrics != nil {
		t.enq = time.Now()
	}
	s.mu.Lock()
	if err := s.writableLocked(); err != nil {
		s.mu.Unlock()
		s.q.Release(taskq.P0)
		return err
	}
	_, present := s.mu.live[t.key]
	if t.kind == taskDelete && !present {
		s.mu.Unlock()
		s.q.Release(taskq.P0)
		return fmt.Errorf("%w: delete %q", ErrNotFound, t.key)
	}
	s.mu.seq++
	t.seq = s.mu.seq
	s.mu.pending[t.key] = pend{seq: t.seq, enc: t.enc, voff: t.voff}
	if t.kind == taskPush {
		s.mu.live[t.key] = struct{}{}
		for _, sl := range s.mu.samplers {
			sl.s.BuildIndex(t.key, fields)
		}
	} else {
		delete(s.mu.live, t.key)
		for _, sl := range s.mu.samplers {
			sl.s.RemoveIndex(t.key)
		}
	}
	s.q.Put(taskq.P0, t)
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("persist: %s %q queued but not yet durable: %w", t.kind, t.key, ctx.Err())
	}
}

func (s *Store) reserve(ctx context.Context) error {
	err := s.q.Reserve(ctx, taskq.P0, s.opts.QueueFull == QueueFullBlock)
	if errors.Is(err, taskq.ErrFull) {
		return ErrQueueFull
	}
	if err != nil {
		return fmt.Errorf("persist: waiting for queue room: %w", err)
	}
	return nil
}

func (s *Store) writableLocked() error {
	if s.mu.closed {
		return ErrClosed
	}
	return s.mu.bgErr
}

// Get returns key's value. The slice may alias store memory: treat it as
// read-only. A value read from Pebble schedules a populate into the cache
// (Hybrid).
func (s *Store) Get(key string) ([]byte, error) {
	enc, voff, err := s.lookup(key)
	if err != nil {
		return nil, err
	}
	return enc[voff:], nil
}

// GetRecord is Get with the record's fields decoded.
func (s *Store) GetRecord(key string) (Record, error) {
	enc, _, err := s.lookup(key)
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(enc)
}

func (s *Store) lookup(key string) ([]byte, int, error) {
	if key == "" {
		return nil, 0, ErrEmptyKey
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, 0, ErrClosed
	}
	if p, ok := s.mu.pending[key]; ok {
		s.mu.Unlock()
		if p.enc == nil {
			return nil, 0, fmt.Errorf("%w: %q", ErrNotFound, key)
		}
		s.cacheHits.Add(1)
		return p.enc, p.voff, nil
	}
	var e *centry
	if s.opts.Mode == Hybrid {
		e = s.mu.cache.get(key)
	} else {
		e = s.mu.cache.m[key] // Memory mode never evicts: skip recency upkeep
	}
	seq := s.mu.seq
	s.mu.Unlock()
	if e != nil {
		s.cacheHits.Add(1)
		return e.enc, e.voff, nil
	}
	// Not pending and not cached: if the key exists it is in Pebble, because
	// eviction writes to Pebble before it removes from the cache.
	enc, voff, err := s.readDB(key)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	if err == nil {
		s.cacheMisses.Add(1)
		s.schedulePopulate(key, enc, voff, seq)
	}
	return enc, voff, err
}

// schedulePopulate queues a p1 task to copy key into the cache; if p1 is
// full the populate is dropped: it only warms the cache.
//
// enc is the record just read and seq the write number observed before the
// read: if no write at all was accepted since, enc is still current and the
// worker caches it without reading Pebble again. The cached record is
// shared with the caller, which must treat values as read-only anyway.
func (s *Store) schedulePopulate(key string, enc []byte, voff int, seq uint64) {
	if s.opts.Mode != Hybrid {
		return
	}
	if s.q.Reserve(context.Background(), taskq.P1, false) != nil {
		return
	}
	var enq time.Time
	if s.metrics != nil {
		enq = time.Now()
	}
	s.q.Put(taskq.P1, task{kind: taskPopulate, key: key, enc: enc, voff: voff, seq: seq, enq: enq})
}

// Sample draws n keys with the named sampler and returns their records,
// appended to dst[:0]. Pending writes are included. A key deleted between
// the draw and the read of its value is left out, so fewer than n items may
// come back under concurrent deletes; an empty store gives none.
func (s *Store) Sample(dst []Item, n int, sampler string) ([]Item, error) {
	i, ok := s.samplerIdx[sampler]
	if !ok {
		return dst[:0], fmt.Errorf("%w: %q", ErrUnknownSampler, sampler)
	}
	if n < 0 {
		return dst[:0], fmt.Errorf("persist: sample size %d < 0", n)
	}
	dst = dst[:0]
	cold := false
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return dst, ErrClosed
	}
	seq := s.mu.seq
	sl := s.mu.samplers[i]
	sl.keys = sl.s.Sample(sl.keys, n, sl.r)
	for _, k := range sl.keys {
		if p, ok := s.mu.pending[k]; ok {
			if p.enc != nil {
				dst = append(dst, Item{Key: k, Value: p.enc[p.voff:]})
			}
			continue
		}
		var e *centry
		if s.opts.Mode == Hybrid {
			e = s.mu.cache.get(k)
		} else {
			e = s.mu.cache.m[k]
		}
		if e != nil {
			dst = append(dst, Item{Key: k, Value: e.enc[e.voff:]})
			continue
		}
		dst = append(dst, Item{Key: k}) // nil Value: read below, outside mu
		cold = true
	}
	s.mu.Unlock()
	if !cold {
		s.cacheHits.Add(int64(len(dst)))
		return dst, nil
	}
	out := dst[:0]
	var misses int64
	for _, it := range dst {
		if it.Value == nil {
			enc, voff, err := s.readDB(it.Key)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return out, err
			}
			it.Value = enc[voff:]
			misses++
			s.schedulePopulate(it.Key, enc, voff, seq)
		}
		out = append(out, it)
	}
	s.cacheMisses.Add(misses)
	s.cacheHits.Add(int64(len(out)) - misses)
	return out, nil
}

// Len is the number of keys, pending writes included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.live)
}

// Stats returns counters for tests, benchmarks and metrics.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := Stats{Len: len(s.mu.live), Pending: len(s.mu.pending), CacheEntries: len(s.mu.cache.m),
		CacheBytes: s.mu.cache.bytes, MaxCacheBytes: s.mu.cache.max}
	s.mu.Unlock()
	if s.opts.Mode == Hybrid {
		st.CacheLimit = s.limit
	}
	st.Evictions, st.Populates = s.evictions.Load(), s.populates.Load()
	st.CacheHits, st.CacheMisses = s.cacheHits.Load(), s.cacheMisses.Load()
	st.QueueP0, st.QueueP1 = s.q.Len(taskq.P0), s.q.Len(taskq.P1)
	return st
}

// Wait returns once every write accepted before the call has been applied
// (to the cache, or to Pebble without a WAL sync). Unlike Flush it forces
// nothing to disk; benchmarks use it to count writes when they land, not
// when they are queued.
func (s *Store) Wait(ctx context.Context) error { return s.barrier(ctx, taskWait) }

// Flush waits until every write accepted before the call is applied and,
// in Hybrid and Disk modes, durable in Pebble (dirty cache entries written,
// WAL synced). In Memory mode it only waits for application.
func (s *Store) Flush(ctx context.Context) error { return s.barrier(ctx, taskFlush) }

func (s *Store) barrier(ctx context.Context, kind taskKind) error {
	if err := s.reserve(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.writableLocked(); err != nil {
		s.mu.Unlock()
		s.q.Release(taskq.P0)
		return err
	}
	done := make(chan error, 1)
	s.q.Put(taskq.P0, task{kind: kind, done: done})
	s.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("persist: %s: %w", kind, ctx.Err())
	}
}

// Close stops the snapshot timer, applies every queued write, makes the
// cache durable (Hybrid: dirty entries go to Pebble), stops the worker and
// closes Pebble. It does not take a final snapshot; call Snapshot first if
// one is wanted. Calls after the first return nil.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	// The timer may be inside Snapshot, which needs the worker: stop the
	// timer first, while the worker still runs.
	s.stopTimer()
	var err error
	if rerr := s.q.Reserve(context.Background(), taskq.P0, true); rerr == nil {
		done := make(chan error, 1)
		s.q.Put(taskq.P0, task{kind: taskFlush, done: done})
		err = <-done
	}
	stop := make(chan error, 1)
	if rerr := s.q.Reserve(context.Background(), taskq.P0, true); rerr == nil {
		s.q.Put(taskq.P0, task{kind: taskStop, done: stop})
		<-s.workerD
	}
	s.cancel()
	return errors.Join(err, s.closeResources())
}

func (s *Store) closeResources() error {
	var errs []error
	if s.db != nil {
		if s.fatal.failed() {
			// Pebble cannot continue, and one of its goroutines may be
			// parked holding its locks: leave it to the process's exit.
			errs = append(errs, fmt.Errorf("persist: %s left unclosed: %w", s.dbDir(), s.fatal.err))
		} else {
			errs = append(errs, guardPebble(s.fatal, s.db.Close))
		}
		s.db = nil
	}
	s.snapMu.Lock()
	if s.bucket != nil {
		errs = append(errs, s.bucket.Close())
		s.bucket = nil
	}
	s.snapMu.Unlock()
	s.metrics.unregister()
	return errors.Join(errs...)
}

func (s *Store) stopTimer() {
	s.timerCancel()
	s.timerWG.Wait()
}
