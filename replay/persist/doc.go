// Package persist is herd's persistent replay store: a key → record store
// for rollout data that outgrows memory or must outlive a crashed trial.
// Records live in a hot in-memory LRU cache over a cold Pebble store
// (github.com/cockroachdb/pebble/v2), writes are applied asynchronously by
// one worker, samplers index every key of both tiers, and snapshots go to
// a blob URL (file://; s3://, gs://, azblob://, hdfs:// in a build with -tags cloud, see blobstore) from which Open
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
//
// # Design notes
//   - *One worker, everything else under one short lock.* The worker is the only goroutine that changes
//     cache contents or writes Pebble, so a task needs no coordination between its Pebble I/O (done
//     outside the lock) and its cache update. Readers take the lock only for map lookups; no I/O,
//     copy or upload is done under it.
//   - *Pending index keyed by write number.* `Push` numbers the write and queues it in the same
//     critical section (after reserving queue room, so the send never blocks under the lock), so queue
//     order = write order per key; a pending entry is dropped only by the task that wrote it, after the
//     write landed. This fixes the RFC prototype's unlocked pending-index mutation, and gives
//     read-your-writes without waiting.
//   - *Eviction order.* Evicted records are written to Pebble (one batch) before they leave the cache,
//     so a key is always in pending, cache or Pebble. The cache limit is hard: a p1 evict starts at 90%
//     and a push that would exceed 100% evicts inline first (measured high-water mark ≤ limit in
//     `TestCacheWithinLimit`).
//   - *p0/p1 pick.* Two bounded channels; when both are non-empty the single consumer takes p0 with
//     probability 0.8 from a seeded PCG stream (`internal/rng`), otherwise a `select`. Back-pressure:
//     capacity tokens reserved before the lock (`Reserve`), block-with-context or `ErrQueueFull`.
//   - *Group commit.* In Disk mode and Hybrid+Sync, the worker folds consecutive queued pushes (up to
//     256 / 16 MiB) into one Pebble batch: one WAL write and one sync per group.
//   - *Samplers as plugins* (`Check`, `BuildIndex` (upsert), `RemoveIndex`, `Sample`, `Len`), called
//     under the store lock so they see pending writes. `Prioritized` and `PriorityTime` map keys to
//     slots of `herd/replay/sumtree` (Set O(log_K N), freed slots set to 0 and reused, tree doubled
//     when full, `Rebuild` every 4·capacity updates against drift). PriorityTime stores
//     decay^(ref − t) and rebases ref when weights would pass e^600. Sampler state (and its PCG state)
//     is saved in snapshots when the sampler implements `encoding.BinaryMarshaler`; otherwise it is
//     rebuilt from the records in key order.
//   - *Snapshots.* A snapshot is a p0 task, so it sits at one point in the write order: the worker
//     takes a Pebble checkpoint (`WithFlushedWAL`, hard links) and copies *references* to the cache's
//     immutable records, then continues; sampler states are marshalled under the lock at the same
//     point. Hashing/uploading runs on the caller's goroutine (the timer's for periodic ones), never on
//     the worker (the RFC prototype zipped a live database on its only worker thread). Layout:
//     `objects/<sha256>` (content-addressed: an already-present object is read back and checked
//     against size + SHA-256 before it is reused, a damaged one is re-uploaded; unchanged sstables are
//     not re-hashed locally) and `snapshots/<20-digit id>/MANIFEST.json`, written last; a snapshot
//     without manifest is invisible. Each object `Put` is atomic and durable (gocloud writers commit
//     on Close; the file adapter writes `.tmp-*`, syncs, renames and syncs the directory; the HDFS
//     adapter writes `.tmp-*` and renames). Downloads
//     are verified against size + SHA-256 → `ErrCorrupt`. The manifest is strict JSON
//     (`format: "herd-persist-snapshot"`, `version: 1`); cache file: `HERDCACH`, uvarint version,
//     count, (key, record) pairs; record: version byte, fields (name, float64 LE) sorted, value.
//   - *Restore* picks the newest snapshot with an intact manifest (corrupt newer ones are skipped and
//     logged), builds the store in `Dir/db.restore` (checkpoint downloaded and synced, cache-file
//     records written into Pebble after it, sampler states loaded and checked: each sampler must index
//     exactly the restored key count), syncs, renames it to `Dir/db` (which must not hold a store) and
//     syncs `Dir`. Any failure removes `Dir/db.restore`, so a failed restore leaves nothing to serve.
//     A Memory-mode store restores a Pebble snapshot through a scratch in-memory Pebble.
//
// Departures, and why.
//   - `Push(ctx, key, rec)`, `Delete(ctx, key)`, `Flush(ctx)`, `Snapshot(ctx)` take a context (for
//     back-pressure and uploads); `Sample(dst, n, sampler)` appends into a reused slice; `Get` returns
//     a slice aliasing the stored record for cached keys (read-only; that is what makes memory-mode
//     gets allocation-free). `Wait(ctx)` is an extra barrier: all accepted writes applied, nothing forced to
//     disk (used by the benchmark to count pushes when applied).
//   - Sampler rows in `herd bench persist` count *records* per second (batch of `--sample-n`, 32).
//   - Priorities are updated by re-pushing a record (no separate priority-update call yet).
//
// Running the S3 test against Versity S3 Gateway instead of gofakes3. The tests build an
// `s3://` URL of the form
// `s3://BUCKET?endpoint=http://127.0.0.1:7070&use_path_style=true&region=us-east-1&disable_https=true&request_checksum_calculation=when_required&response_checksum_validation=when_required&prefix=run1/`
// with `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` in the environment. For Versity:
// `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`, then
// `ROOT_ACCESS_KEY=test ROOT_SECRET_KEY=testtest versitygw --port :7070 posix /tmp/vgw`, create the
// bucket (`mkdir /tmp/vgw/herd`), and point the same URL (with those keys) at port 7070 — the store
// code is unchanged; only `fakeS3` in `snapshot_test.go` would return that URL. (Not run here: no
// network for the install on the machine that wrote this.)
//
// HDFS. `hdfs://namenode:port/path` goes to a small adapter over `github.com/colinmarc/hdfs/v2`
// (write to a temp name, rename). It compiles and follows the same contract but has not been
// run against a namenode.
//
// # Faults tried
//
// Each row is checked by the named test in `replay/persist` (or `blobstore`, `internal/durable`).
//
//	| Fault tried | Behaviour |
//	|---|---|
//	| SIGKILL while pushing and snapshotting, 24 times (`TestCrash`) | Reopen: Sync loses nothing acknowledged; WriteBack keeps everything before the last returned `Flush`. Newest snapshot restores a prefix of the writes, at least up to the last one that completed. |
//	| Power loss (Pebble `vfs.NewCrashableMem`, only synced data survives; sometimes 50% of unsynced blocks kept), 20 trials, Disk and Hybrid, half in a Dir that did not exist (`TestPowerLossSync`) | 0 acknowledged Sync writes lost. Before the fix: every write lost in a new Dir (its directory entries were never synced). |
//	| Power loss right after `Put` to a `file://` bucket in a new directory (`TestFileBucketPowerLoss`) | Every object and manifest whose `Put` returned is there, whole, and listed (file and directory synced). gocloud's fileblob, used before, synced nothing. |
//	| One bit flipped in a snapshot's cache file, sampler state or checkpoint file; restore in Disk and Hybrid (`TestFailedRestoreLeavesNothing`) | `RestoreFrom` fails with `ErrCorrupt`; Dir is left as it was; a plain `Open` then opens a new, empty store; a retry from an intact snapshot restores every key, also over a leftover `Dir/db.restore` from a crashed restore. The caller's `Sampler` objects are changed only after the restore has committed, so reusing them after a failure finds them as they were. |
//	| Restore into a Dir that already holds a store | Refused with an error; the store is untouched. |
//	| A crash during a restore | At most `Dir/db.restore` is left, never `Dir/db`; the next `Open` removes it. |
//	| Newest snapshot manifest truncated, empty, garbage, or naming another id (`TestCorruptNewestManifestFallsBack`) | Restore uses the newest intact snapshot and logs (Options.Logger, warning) which one and how many were skipped; with no intact manifest: `ErrCorrupt`. Later snapshots get fresh ids. |
//	| A reused bucket object damaged (bit flip in an sstable, truncated cache file) before the next `Snapshot` (`TestSnapshotRepairsDamagedObjects`) | The next `Snapshot` reads every reused object back, finds both, re-uploads them (`SnapshotInfo.Repaired`, logged) and restores. |
//	| A damaged object that a restore needs | `ErrCorrupt` naming the object; no fallback to older snapshots (they usually share the object: content addressing); the next `Snapshot` of the source repairs it. |
//	| Checkpoint directory I/O errors during a snapshot (`TestCheckpointFailure`) | The snapshot fails with the error; the store keeps serving; the next snapshot succeeds. |
//	| Manifest upload fails (`TestSnapshotWithoutManifestIgnored`) | The snapshot reports an error and is invisible; restore uses the previous one. |
//	| Arbitrary bytes as a manifest or sampler state (`FuzzManifest`, `FuzzSamplerState`, ≥ 60 s each) | An error wrapping `ErrCorrupt`, never a panic; lengths are checked against the bytes left, so no allocation beyond the input's size (cache-file chunks are bounded by the object's declared size). |
//	| Unreachable bucket, unknown scheme, unsupported `file://` parameter or host | `ErrUnreachable` / `ErrBadURL` at `Open`. |
//
// Fuzz runs (2026-11-23, 2 workers, load average ≈ 25 from other builds):
// `go test -run='^$' -fuzz='^FuzzManifest$' -fuzztime=75s ./replay/persist/` — 105,547 execs, no
// failure; `go test -run='^$' -fuzz='^FuzzSamplerState$' -fuzztime=60s ./replay/persist/` — 80,682
// execs, no failure. No crasher was found, so `testdata/fuzz` holds none; the inconsistent states
// fixed while writing the targets (a key repeated in a Uniform or sum-tree state, an empty key,
// weight on a free slot) are regression cases in `TestSamplerStateRejectsInconsistent`.
//
// What a crash can lose (SIGKILL or power loss, the same once directories are synced):
// WriteBack — writes after the last returned `Flush` (queued writes, dirty cache entries, unsynced
// WAL); Sync — only writes not yet acknowledged; Memory mode — everything since the last completed
// snapshot; a snapshot whose `Snapshot` had not returned (invisible: no manifest); a restore whose
// `Open` had not returned (Dir as before). Left behind as garbage, never served: `Dir/db.restore`
// (removed by the next `Open`), `.tmp-*` files in a `file://` bucket, and objects of snapshots whose
// manifest was never written.
package persist
