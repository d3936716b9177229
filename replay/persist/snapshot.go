package persist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/replay/persist/blobstore"
)

// Snapshot format, version 1. Everything lives under the snapshot URL:
//
//	objects/<sha256 hex>            file bodies, content-addressed: Pebble
//	                                checkpoint files, cache files, sampler
//	                                states. An object already in the bucket
//	                                is read back and checked against its
//	                                size and SHA-256; only an intact one is
//	                                not uploaded again.
//	snapshots/<id, 20 digits>/MANIFEST.json
//	                                written last; a snapshot is complete
//	                                exactly when its manifest exists.
//
// The manifest is JSON (type manifest below). A cache file is
//
//	8 bytes "HERDCACH", uvarint version (1), uvarint entry count,
//	per entry: uvarint key length, key, uvarint record length, record
//
// with records in the format of record.go, least recently used first, and
// a sampler state is that sampler's MarshalBinary output.
const (
	manifestFormat  = "herd-persist-snapshot"
	manifestVersion = 1
	cacheMagic      = "HERDCACH"
	cacheVersion    = 1
	manifestName    = "MANIFEST.json"
)

type manifest struct {
	Format   string       `json:"format"`
	Version  int          `json:"version"`
	ID       uint64       `json:"id"`
	Seq      uint64       `json:"seq"` // every write numbered <= Seq is included, none after
	Mode     string       `json:"mode"`
	Created  string       `json:"created"` // RFC 3339, informational only
	Len      int          `json:"len"`     // keys in the snapshot
	DB       []fileRef    `json:"db"`      // Pebble checkpoint, paths relative to Dir/db
	Cache    *fileRef     `json:"cache"`
	Samplers []samplerRef `json:"samplers"`
}

type fileRef struct {
	Path   string `json:"path"`
	Object string `json:"object"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

type samplerRef struct {
	Name  string  `json:"name"`
	RNG   []byte  `json:"rng"` // the sampler's PCG state (MarshalBinary), base64 in JSON
	State fileRef `json:"state"`
}

// SnapshotInfo describes a completed snapshot.
type SnapshotInfo struct {
	ID            uint64
	Seq           uint64 // writes numbered <= Seq are included
	Len           int
	Manifest      string // object key of the manifest
	Files         int
	UploadedBytes int64         // bytes sent
	SkippedBytes  int64         // bytes already in the bucket, checked intact, not sent again
	VerifiedBytes int64         // bytes read back from the bucket to check objects before reuse
	Repaired      int           // damaged objects found in the bucket and uploaded again
	Pause         time.Duration // time the worker spent on the snapshot (checkpoint + cache capture)
	Total         time.Duration
}

// snapCapture is what the worker hands back for one snapshot task.
type snapCapture struct {
	dir     string // checkpoint directory; "" in Memory mode
	entries []snapEntry
	pause   time.Duration
}

type snapEntry struct {
	key string
	enc []byte
}

// captureSnapshot runs on the worker, after every earlier write has been
// applied and before any later one: it takes a Pebble checkpoint (hard
// links plus a copy of the WAL tail) and copies references to the cache's
// records (records are immutable, so references suffice). The upload runs
// later on the caller's goroutine.
func (s *Store) captureSnapshot(c *snapCapture) error {
	start := time.Now()
	if s.db != nil {
		if err := guardPebble(s.fatal, func() error { return s.db.Checkpoint(c.dir, pebble.WithFlushedWAL()) }); err != nil {
			return fmt.Errorf("persist: checkpoint %s: %w", c.dir, err)
		}
	}
	s.mu.Lock()
	c.entries = make([]snapEntry, 0, len(s.mu.cache.m))
	for e := s.mu.cache.head.prev; e != &s.mu.cache.head; e = e.prev {
		c.entries = append(c.entries, snapEntry{key: e.key, enc: e.enc})
	}
	s.mu.Unlock()
	c.pause = time.Since(start)
	return nil
}

// Snapshot takes a crash-consistent snapshot and uploads it to the
// snapshot URL; it returns when the manifest is written. Writes made
// before the call are included, writes made after it are not. The worker
// pauses only for the checkpoint and the cache capture; hashing and
// uploading run on the calling goroutine. One snapshot runs at a time.
func (s *Store) Snapshot(ctx context.Context) (SnapshotInfo, error) {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	info, err := s.snapshotLocked(ctx)
	if s.metrics != nil {
		res := "ok"
		if err != nil {
			res = "error"
		}
		s.metrics.snapshots.WithLabelValues(res).Inc()
	}
	return info, err
}

func (s *Store) snapshotLocked(ctx context.Context) (SnapshotInfo, error) {
	start := time.Now()
	s.mu.Lock()
	closed := s.mu.closed
	s.mu.Unlock()
	if closed {
		return SnapshotInfo{}, ErrClosed
	}
	if s.bucket == nil {
		return SnapshotInfo{}, ErrNoSnapshotURL
	}
	s.checked = map[string]bool{}
	if s.snapNext == 0 {
		ids, err := manifestIDs(ctx, s.bucket)
		if err != nil {
			return SnapshotInfo{}, err
		}
		s.snapNext = 1
		if len(ids) > 0 {
			s.snapNext = ids[len(ids)-1] + 1
		}
	}
	m := &manifest{Format: manifestFormat, Version: manifestVersion, ID: s.snapNext,
		Mode: s.opts.Mode.String(), Created: time.Now().UTC().Format(time.RFC3339Nano)}
	c := &snapCapture{}
	if s.db != nil {
		c.dir = s.opts.FS.PathJoin(s.opts.Dir, "checkpoints", strconv.FormatUint(m.ID, 10))
		_ = s.opts.FS.RemoveAll(c.dir) // left over from a crash
		if err := s.opts.FS.MkdirAll(s.opts.FS.PathJoin(s.opts.Dir, "checkpoints"), 0o755); err != nil {
			return SnapshotInfo{}, fmt.Errorf("persist: snapshot: %w", err)
		}
		defer func() { _ = s.opts.FS.RemoveAll(c.dir) }()
	}
	if err := s.reserve(ctx); err != nil {
		return SnapshotInfo{}, err
	}
	// Sampler states are taken under mu, at the same point in the write
	// order as the snapshot task: both include exactly the writes numbered
	// up to m.Seq.
	type samplerState struct {
		name  string
		rng   []byte
		state []byte
	}
	var states []samplerState
	done := make(chan error, 1)
	s.mu.Lock()
	if err := s.writableLocked(); err != nil {
		s.mu.Unlock()
		s.q.Release(0)
		return SnapshotInfo{}, err
	}
	m.Seq, m.Len = s.mu.seq, len(s.mu.live)
	var merr error
	for _, sl := range s.mu.samplers {
		bm, ok := sl.s.(encoding.BinaryMarshaler)
		if !ok {
			continue
		}
		st, err := bm.MarshalBinary()
		r, err2 := sl.src.MarshalBinary()
		if err = errors.Join(err, err2); err != nil {
			merr = fmt.Errorf("persist: snapshot sampler %q: %w", sl.s.Name(), err)
			break
		}
		states = append(states, samplerState{sl.s.Name(), r, st})
	}
	if merr != nil {
		s.mu.Unlock()
		s.q.Release(0)
		return SnapshotInfo{}, merr
	}
	var enq time.Time
	if s.metrics != nil {
		enq = time.Now()
	}
	s.q.Put(0, task{kind: taskSnapshot, snap: c, done: done, enq: enq})
	s.mu.Unlock()
	// Wait even if ctx ends: the worker is writing into c.dir.
	if err := <-done; err != nil {
		return SnapshotInfo{}, err
	}
	info := SnapshotInfo{ID: m.ID, Seq: m.Seq, Len: m.Len, Pause: c.pause}

	// Upload, off the worker. Checkpoint files first, then cache and
	// sampler states, the manifest last.
	if c.dir != "" {
		refs, err := s.uploadDir(ctx, c.dir, "", &info)
		if err != nil {
			return info, err
		}
		m.DB = refs
	}
	if len(c.entries) > 0 {
		ref, err := s.uploadCache(ctx, c.entries, &info)
		if err != nil {
			return info, err
		}
		m.Cache = &ref
	}
	c.entries = nil
	for _, st := range states {
		ref, err := s.uploadBytes(ctx, st.state, &info)
		if err != nil {
			return info, err
		}
		ref.Path = "sampler/" + st.name
		m.Samplers = append(m.Samplers, samplerRef{Name: st.name, RNG: st.rng, State: ref})
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return info, fmt.Errorf("persist: snapshot manifest: %w", err)
	}
	info.Manifest = manifestKey(m.ID)
	if err := s.bucket.Put(ctx, info.Manifest, bytes.NewReader(body), int64(len(body))); err != nil {
		return info, fmt.Errorf("persist: snapshot manifest: %w", err)
	}
	info.UploadedBytes += int64(len(body))
	info.Files++
	s.snapNext++
	info.Total = time.Since(start)
	return info, nil
}

func manifestKey(id uint64) string { return fmt.Sprintf("snapshots/%020d/%s", id, manifestName) }

func objectKey(sum []byte) string { return "objects/" + hex.EncodeToString(sum) }

// immutableFile reports whether a Pebble file never changes once written,
// so that its name identifies its content within one store's lifetime.
func immutableFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// uploadDir uploads every file under dir (relative paths under rel).
func (s *Store) uploadDir(ctx context.Context, dir, rel string, info *SnapshotInfo) ([]fileRef, error) {
	fs := s.opts.FS
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("persist: snapshot list %s: %w", dir, err)
	}
	sort.Strings(names)
	var refs []fileRef
	for _, name := range names {
		p := fs.PathJoin(dir, name)
		st, err := fs.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("persist: snapshot stat %s: %w", p, err)
		}
		relName := path.Join(rel, name)
		if st.IsDir() {
			sub, err := s.uploadDir(ctx, p, relName, info)
			if err != nil {
				return nil, err
			}
			refs = append(refs, sub...)
			continue
		}
		if ref, ok := s.uploaded[relName]; ok && immutableFile(name) && ref.Size == st.Size() {
			// Same sstable as in an earlier snapshot: not hashed again,
			// and not sent again if the bucket's copy is intact.
			intact, err := s.reuse(ctx, ref, info)
			if err != nil {
				return nil, err
			}
			if intact {
				info.SkippedBytes += st.Size()
				ref.Path = relName
				refs = append(refs, ref)
				info.Files++
				continue
			}
		}
		ref, err := s.uploadFile(ctx, p, st.Size(), info)
		if err != nil {
			return nil, err
		}
		ref.Path = relName
		if immutableFile(name) {
			s.uploaded[relName] = ref
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

func (s *Store) uploadFile(ctx context.Context, p string, size int64, info *SnapshotInfo) (fileRef, error) {
	fs := s.opts.FS
	h := sha256.New()
	if err := readFileInto(fs, p, h); err != nil {
		return fileRef{}, err
	}
	ref := fileRef{Object: objectKey(h.Sum(nil)), Size: size}
	ref.SHA256 = strings.TrimPrefix(ref.Object, "objects/")
	info.Files++
	intact, err := s.reuse(ctx, ref, info)
	if err != nil {
		return fileRef{}, err
	}
	if intact {
		info.SkippedBytes += size
		return ref, nil
	}
	f, err := fs.Open(p)
	if err != nil {
		return fileRef{}, fmt.Errorf("persist: snapshot open %s: %w", p, err)
	}
	defer f.Close()
	if err := s.bucket.Put(ctx, ref.Object, f, size); err != nil {
		return fileRef{}, fmt.Errorf("persist: snapshot upload %s: %w", p, err)
	}
	info.UploadedBytes += size
	s.checked[ref.Object] = true
	return ref, nil
}

// reuse reports whether ref's object is in the bucket and intact. An
// object's name is only a claim about its content: a damaged copy would
// otherwise be referenced by every later snapshot. So the object is read
// back and checked against ref's size and SHA-256; a damaged one is
// logged and counted, and the caller uploads it again over the bad copy.
// Each object is checked once per snapshot.
func (s *Store) reuse(ctx context.Context, ref fileRef, info *SnapshotInfo) (bool, error) {
	if ok, seen := s.checked[ref.Object]; seen {
		return ok, nil
	}
	r, err := s.bucket.Get(ctx, ref.Object)
	if errors.Is(err, blobstore.ErrNotFound) {
		s.checked[ref.Object] = false
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("persist: snapshot: %w", err)
	}
	defer r.Close()
	n, err := io.Copy(io.Discard, newHashingReader(r, ref))
	info.VerifiedBytes += n
	if errors.Is(err, ErrCorrupt) {
		s.logger().Warn("persist: snapshot: damaged object in the bucket, uploading it again",
			"object", ref.Object, "error", err)
		info.Repaired++
		s.checked[ref.Object] = false
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("persist: snapshot: check %s: %w", ref.Object, err)
	}
	s.checked[ref.Object] = true
	return true, nil
}

func readFileInto(fs vfs.FS, p string, w io.Writer) error {
	f, err := fs.Open(p)
	if err != nil {
		return fmt.Errorf("persist: snapshot open %s: %w", p, err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("persist: snapshot read %s: %w", p, err)
	}
	return nil
}

func (s *Store) uploadBytes(ctx context.Context, b []byte, info *SnapshotInfo) (fileRef, error) {
	sum := sha256.Sum256(b)
	ref := fileRef{Object: objectKey(sum[:]), Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	info.Files++
	intact, err := s.reuse(ctx, ref, info)
	if err != nil {
		return fileRef{}, err
	}
	if intact {
		info.SkippedBytes += ref.Size
		return ref, nil
	}
	if err := s.bucket.Put(ctx, ref.Object, bytes.NewReader(b), ref.Size); err != nil {
		return fileRef{}, fmt.Errorf("persist: snapshot upload: %w", err)
	}
	info.UploadedBytes += ref.Size
	s.checked[ref.Object] = true
	return ref, nil
}

// uploadCache writes the captured cache in two passes over the records
// (hash and size, then the streamed upload), so a large cache is never
// copied into one buffer.
func (s *Store) uploadCache(ctx context.Context, entries []snapEntry, info *SnapshotInfo) (fileRef, error) {
	h := sha256.New()
	size, err := writeCache(h, entries)
	if err != nil {
		return fileRef{}, err
	}
	sum := h.Sum(nil)
	ref := fileRef{Path: "cache", Object: objectKey(sum), Size: size, SHA256: hex.EncodeToString(sum)}
	info.Files++
	intact, err := s.reuse(ctx, ref, info)
	if err != nil {
		return fileRef{}, err
	}
	if intact {
		info.SkippedBytes += size
		return ref, nil
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := writeCache(pw, entries)
		pw.CloseWithError(err)
	}()
	err = s.bucket.Put(ctx, ref.Object, pr, size)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the writer if Put stopped early
	if err != nil {
		return fileRef{}, fmt.Errorf("persist: snapshot upload cache: %w", err)
	}
	info.UploadedBytes += size
	s.checked[ref.Object] = true
	return ref, nil
}

func writeCache(w io.Writer, entries []snapEntry) (int64, error) {
	var n int64
	var hdr [3 * binary.MaxVarintLen64]byte
	write := func(b []byte) error {
		k, err := w.Write(b)
		n += int64(k)
		return err
	}
	b := append([]byte(cacheMagic), hdr[:0]...)
	b = binary.AppendUvarint(b, cacheVersion)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	if err := write(b); err != nil {
		return n, err
	}
	for _, e := range entries {
		b = binary.AppendUvarint(hdr[:0], uint64(len(e.key)))
		if err := write(b); err != nil {
			return n, err
		}
		if err := write([]byte(e.key)); err != nil {
			return n, err
		}
		if err := write(binary.AppendUvarint(hdr[:0], uint64(len(e.enc)))); err != nil {
			return n, err
		}
		if err := write(e.enc); err != nil {
			return n, err
		}
	}
	return n, nil
}

// snapshotTimer takes a snapshot every SnapshotEvery until ctx ends.
func (s *Store) snapshotTimer(ctx context.Context) {
	defer s.timerWG.Done()
	t := time.NewTicker(s.opts.SnapshotEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Snapshot(ctx); err != nil && ctx.Err() == nil {
				s.snapErr.Store(&err)
			}
		}
	}
}

// LastSnapshotError returns the error of the last failed automatic
// snapshot, or nil.
func (s *Store) LastSnapshotError() error {
	if p := s.snapErr.Load(); p != nil {
		return *p
	}
	return nil
}

// manifestIDs lists the ids of complete snapshots, ascending.
func manifestIDs(ctx context.Context, b blobstore.Bucket) ([]uint64, error) {
	keys, err := b.List(ctx, "snapshots/")
	if err != nil {
		return nil, fmt.Errorf("persist: list snapshots: %w", err)
	}
	var ids []uint64
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, "snapshots/")
		if !ok {
			continue
		}
		idStr, name, ok := strings.Cut(rest, "/")
		if !ok || name != manifestName {
			continue
		}
		id, err := strconv.ParseUint(idStr, 10, 64)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// newHashingReader reads at most one byte more than ref's size, enough to
// tell that an object is too long without reading all of it.
func newHashingReader(r io.Reader, ref fileRef) *hashingReader {
	return &hashingReader{r: io.LimitReader(r, ref.Size+1), h: sha256.New(), want: ref}
}

// hashingReader checks a download against the manifest's size and digest.
type hashingReader struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	want fileRef
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	hr.n += int64(n)
	if err == io.EOF {
		if hr.n != hr.want.Size || hex.EncodeToString(hr.h.Sum(nil)) != hr.want.SHA256 {
			return n, fmt.Errorf("%w: object %s: size %d sha256 %x, manifest says %d %s",
				ErrCorrupt, hr.want.Object, hr.n, hr.h.Sum(nil), hr.want.Size, hr.want.SHA256)
		}
	}
	return n, err
}
