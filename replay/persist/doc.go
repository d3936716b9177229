// Package persist is herd's persistent replay store: a key → record store
// for rollout data that outgrows memory or must outlive a crashed trial.
// Records live in a hot in-memory LRU cache over a cold Pebble store
// (github.com/cockroachdb/pebble/v2), writes are applied asynchronously by
// one worker, samplers index every key of both tiers, and snapshots go to
// a blob URL (file://, s3://, gs://, azblob://, hdfs://) from which Open
// restores.
//
// # How it fits
//
// replay/ holds the in-memory buffers an algorithm samples from each step;
// persist is for the cases they cannot serve: data larger than RAM, replay
// kept across restarts, a buffer served to other processes later (the API
// is small and value-typed so that it can go over the network). The
// Prioritized sampler uses the same K-ary sum tree as replay.Prioritized
// (herd/replay/sumtree), but over store keys, whichever tier holds them.
//
// # The driving loop
//
//	s, err := persist.Open(ctx, persist.Options{
//		Mode: persist.Hybrid, Dir: "/data/replay", CacheMB: 4096,
//		Samplers:    []persist.Sampler{persist.NewPrioritized("per", "priority", 0.6)},
//		SnapshotURL: "s3://bucket?region=eu-west-1&prefix=run7/", // every 3 min
//	})
//	for step := range steps {
//		s.Push(ctx, key(step), persist.Record{Value: blob, Fields: map[string]float64{"priority": p}})
//		batch, _ = s.Sample(batch, 256, "per") // sees the push just made
//		...
//	}
//	s.Flush(ctx)  // everything so far durable in Pebble
//	s.Close()
//
// After a crash, Open with the same Dir reopens what Pebble holds, or
// Open with RestoreFrom set to the snapshot URL (and an empty Dir)
// restores the newest complete snapshot: store, cache and sampler state
// (see "Restores" below for what happens when a snapshot is damaged).
//
// # Modes
//
//	Memory  everything in the cache; no Pebble, CacheMB ignored.
//	Disk    everything in Pebble; no cache.
//	Hybrid  cache of CacheMB (keys + records + ~112 B per entry) over
//	        Pebble, write-back: pushes land in the cache; past 90% of the
//	        limit a p1 task evicts least recently used entries to Pebble
//	        down to 80%, and a push that would cross 100% evicts inline
//	        first, so the cache never exceeds its limit. A read served from
//	        Pebble queues a p1 populate that copies the record back in.
//
// # Writes, the task processor and the pending index
//
// Push and Delete validate, then, under the store's lock, number the write,
// record it in the pending index (key → newest unapplied write), update
// every sampler's index and queue a task on the p0 queue. The single
// worker applies tasks in queue order; a task's pending entry is removed
// only after the write is in the cache or Pebble, and only if no newer
// write to the key has arrived. Get and Sample look in the pending index
// first, then the cache, then Pebble, so a caller always reads its own
// writes (TestReadYourWritesConcurrent). Eviction writes to Pebble before
// it removes from the cache, so a key is never in neither place.
//
// Two bounded queues feed the worker: p0 (push, delete, flush, snapshot)
// and p1 (evict, populate). When both have work the worker takes p0 with
// probability Options.P0Prob (default 0.8) from a seeded stream
// (internal/taskq, TestRatioUnderContention). A full p0 queue blocks Push
// until its context ends, or returns ErrQueueFull (Options.QueueFull). A
// full p1 queue drops populates (they only warm the cache). In Disk mode
// and in Hybrid+Sync, consecutive pushes are committed to Pebble as one
// batch (group commit). Queue depths, task latencies (enqueue → applied,
// by kind), cache bytes, evictions, populates and snapshots are exported
// to Options.Registerer (no global registry).
//
// # When a write counts as acknowledged, and what a crash can lose
//
//	WriteBack (default)  Push returns once queued. A crash (SIGKILL or
//	                     power loss) loses: queued writes, records in the
//	                     cache not yet written to Pebble (Hybrid: written
//	                     at eviction, Flush and Close), and Pebble writes
//	                     whose WAL was not yet synced. What survives a
//	                     reopen: everything before the last Flush that
//	                     returned. Memory mode keeps nothing but snapshots.
//	Sync                 Push returns once the record is in Pebble with
//	                     its WAL synced (Hybrid becomes write-through; the
//	                     cache holds clean copies). Nothing acknowledged is
//	                     lost. In Memory mode Sync only waits for the apply.
//	Snapshots            a restore yields exactly the writes numbered up to
//	                     the snapshot's Seq: every write made before the
//	                     Snapshot call, none after (a prefix of the history).
//	                     A Snapshot that returned survives power loss: the
//	                     file:// bucket syncs each object and the
//	                     directories naming it; object stores acknowledge
//	                     only stored objects.
//	Restores             all or nothing: until Open with RestoreFrom returns
//	                     nil, Dir is as it was (see "Restores").
//
// Power loss can lose more than a process crash, because the OS drops
// what was not synced. Open syncs the parent of every directory it creates
// (Dir itself and Dir/db included), and Dir's parent, so the Sync promise
// holds for a store opened in a Dir that did not exist before. What power
// loss can lose is then exactly what a crash can: WriteBack writes after
// the last Flush; Sync writes not yet acknowledged; a snapshot whose
// Snapshot call had not returned; a restore whose Open had not returned.
//
// TestCrash SIGKILLs a pushing child 24 times and checks these promises on
// reopen and on restore; TestPowerLossSync cuts power 20 times with
// Pebble's crashable in-memory filesystem (vfs.NewCrashableMem: only
// synced data survives), half of them in a new Dir, and finds no
// acknowledged Sync write lost.
//
// # Samplers
//
// A Sampler (sampler.go) is told of every Push (BuildIndex, an upsert) and
// Delete (RemoveIndex) under the store's lock, so it sees pending writes
// too, and keeps the fields it declares in memory even when the value is on
// disk. Shipped: Uniform; Prioritized (p^α over a sum tree); PriorityTime
// (decay^(t_max − t)); example_test.go shows a custom sampler that returns
// keys in order of a declared "score" field. Sample draws keys under the
// lock, then reads cold values outside it. Samplers that implement
// encoding.BinaryMarshaler/Unmarshaler are saved in snapshots with their
// random stream's state, so a restored store draws the same keys;
// others are rebuilt from the records on restore.
//
// # Snapshots
//
// Snapshot (and a timer every SnapshotEvery, default 3 minutes) queues a
// p0 task, so it lands at a precise point in the write order. The worker
// then takes a Pebble checkpoint (hard links; WAL flushed) and copies
// references to the cache's records — records are immutable, so no values
// are copied — and goes back to work; the pause is the checkpoint time.
// Sampler states are taken under the lock at the same point. Hashing and
// uploading run on the caller's goroutine (the timer's, for automatic
// snapshots). Files are content-addressed (objects/<sha256>), so an
// sstable, cache file or sampler state already in the bucket is not sent
// again, and an unchanged sstable is not even re-hashed. A name is only a
// claim about content, though: before an object is reused it is read back
// and checked against its size and SHA-256, once per snapshot; a damaged
// one is uploaded again over the bad copy (SnapshotInfo.Repaired, logged
// to Options.Logger), so damage never spreads to later snapshots. Reuse
// thus saves upload bandwidth, not reads (SnapshotInfo.VerifiedBytes).
// The manifest (snapshots/<id>/MANIFEST.json, versioned JSON, format in
// snapshot.go) is written last; a snapshot without one is ignored. Every
// download is checked against the manifest's size and SHA-256
// (ErrCorrupt).
//
// # Restores
//
// Open with RestoreFrom picks the newest snapshot whose manifest decodes
// and checks out. A newer manifest that is truncated, empty or garbage is
// skipped, and the snapshot used is logged to Options.Logger (a warning
// naming it and the newest); with no intact manifest Open fails with
// ErrCorrupt. A damaged object (size or SHA-256 not as the manifest says)
// fails the restore with ErrCorrupt naming it, without falling back: older
// snapshots usually share the object (objects are content-addressed), and
// the next Snapshot of the source store repairs it.
//
// In Disk and Hybrid modes the store is built in Dir/db.restore: the
// checkpoint files downloaded and synced, the cache file's records written
// into Pebble after them (they may be newer), every digest checked and the
// sampler states fetched; then Pebble's WAL is synced, the directory
// renamed to Dir/db and Dir synced. A restored Dir therefore holds the
// whole snapshot on disk (in Hybrid mode the cache starts with clean
// copies of the snapshot's hot records). Any failure removes
// Dir/db.restore, leaving Dir as it was (and the Options' Samplers: their
// states are applied only after the rename): a plain Open there afterwards
// opens a new, empty store (it never serves part of a snapshot), and a
// retried restore starts afresh. A crash during a restore leaves at most
// Dir/db.restore, never Dir/db; the next Open removes it. Open refuses to
// restore into a Dir/db that already holds a store, and leaves it alone.
// Memory mode restores into memory only.
//
// # Costs
//
// Push: one allocation of the encoded record (fields + value copied), a map
// insert under the lock, the samplers' BuildIndex (O(1) Uniform, O(log_K N)
// sum trees), one channel send. Get of a cached key: a lock, two map
// lookups and an LRU move, no allocation, no copy (the returned slice
// aliases the record: read-only). Get from Pebble: a read and one copy.
// Sample(n): n draws and n lookups under one lock hold; cold values are
// read after it is released. Memory: the cache's bytes plus per key the
// live set entry and each sampler's index (a few tens of bytes).
//
// # Concurrency
//
// Every method is safe for concurrent use. The worker is the only goroutine
// that changes what the cache holds or writes Pebble; the lock (Store.mu)
// guards the pending index, live set, cache and samplers and is never held
// across I/O. Lock order: snapshot mutex, then Store.mu. Open starts the
// worker and the snapshot timer; Close stops the timer, applies and
// flushes every queued write, stops the worker and waits for it.
package persist
