package persist

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"path"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/replay/persist/blobstore"
	"herd/replay/persist/internal/durable"
)

// maxManifestBytes bounds what a manifest may occupy, so a damaged or
// hostile one cannot make a restore allocate without limit.
const maxManifestBytes = 64 << 20

// pickManifest returns the newest snapshot whose manifest is intact.
// Objects of a snapshot whose manifest was never written are simply not
// listed. A manifest that does not decode (truncated, empty, garbage) is
// skipped for the next older one, and the snapshot used is logged; if none
// decodes, the newest one's error is returned (ErrCorrupt).
func (s *Store) pickManifest(ctx context.Context, b blobstore.Bucket) (*manifest, error) {
	ids, err := manifestIDs(ctx, b)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, ErrNoSnapshot
	}
	var skipped []error
	for i := len(ids) - 1; i >= 0; i-- {
		m, err := readManifest(ctx, b, ids[i])
		if errors.Is(err, ErrCorrupt) {
			s.logger().Warn("persist: snapshot manifest corrupt, trying an older snapshot",
				"snapshot", ids[i], "error", err)
			skipped = append(skipped, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(skipped) > 0 {
			s.logger().Warn("persist: restoring an older snapshot: newer manifests are corrupt",
				"snapshot", m.ID, "skipped", len(skipped), "newest", ids[len(ids)-1])
		}
		s.restored = RestoreInfo{Snapshot: m.ID, Newest: ids[len(ids)-1], Skipped: skipped}
		return m, nil
	}
	return nil, fmt.Errorf("no intact snapshot manifest among %d: %w", len(ids), errors.Join(skipped...))
}

// RestoreInfo says which snapshot Open restored (Options.RestoreFrom).
type RestoreInfo struct {
	// Snapshot is the snapshot restored; Newest the newest one at the URL.
	Snapshot, Newest uint64
	// Skipped holds why each snapshot newer than Snapshot was skipped
	// (its manifest is corrupt), newest first.
	Skipped []error
}

// Restored reports which snapshot Open restored, and why newer ones were
// skipped; ok is false when the store was not restored from a snapshot.
// The metric herd_persist_restore_skipped_snapshots counts the skipped.
func (s *Store) Restored() (info RestoreInfo, ok bool) {
	return s.restored, s.restored.Newest != 0 || s.restored.Snapshot != 0
}

func readManifest(ctx context.Context, b blobstore.Bucket, id uint64) (*manifest, error) {
	key := manifestKey(id)
	r, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("persist: restore %s: %w", key, err)
	}
	defer r.Close()
	body, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("persist: restore %s: %w", key, err)
	}
	return decodeManifest(id, body)
}

// decodeManifest parses and checks the manifest of snapshot id. Every
// failure wraps ErrCorrupt.
func decodeManifest(id uint64, body []byte) (*manifest, error) {
	key := manifestKey(id)
	if len(body) > maxManifestBytes {
		return nil, fmt.Errorf("%w: manifest %s: larger than %d bytes", ErrCorrupt, key, maxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var m manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, key, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: manifest %s: data after the manifest", ErrCorrupt, key)
	}
	if m.Format != manifestFormat || m.Version != manifestVersion {
		return nil, fmt.Errorf("%w: manifest %s: format %q version %d, want %q %d",
			ErrCorrupt, key, m.Format, m.Version, manifestFormat, manifestVersion)
	}
	if m.ID != id {
		return nil, fmt.Errorf("%w: manifest %s: says id %d", ErrCorrupt, key, m.ID)
	}
	if _, err := ParseMode(m.Mode); err != nil || m.Len < 0 {
		return nil, fmt.Errorf("%w: manifest %s: mode %q, len %d", ErrCorrupt, key, m.Mode, m.Len)
	}
	names := map[string]bool{}
	for _, sr := range m.Samplers {
		if sr.Name == "" || names[sr.Name] {
			return nil, fmt.Errorf("%w: manifest %s: empty or repeated sampler name %q", ErrCorrupt, key, sr.Name)
		}
		names[sr.Name] = true
	}
	paths := map[string]bool{}
	for _, f := range append(append([]fileRef(nil), m.DB...), derefs(m)...) {
		if f.Path == "" || strings.Contains(f.Path, "..") || path.IsAbs(f.Path) || f.Size < 0 ||
			len(f.SHA256) != 2*sha256.Size || f.Object != "objects/"+f.SHA256 || paths[f.Path] {
			return nil, fmt.Errorf("%w: manifest %s: bad or repeated file entry %+v", ErrCorrupt, key, f)
		}
		if _, err := hex.DecodeString(f.SHA256); err != nil {
			return nil, fmt.Errorf("%w: manifest %s: bad digest %q", ErrCorrupt, key, f.SHA256)
		}
		paths[f.Path] = true
	}
	return &m, nil
}

func derefs(m manifest) []fileRef {
	var refs []fileRef
	if m.Cache != nil {
		refs = append(refs, *m.Cache)
	}
	for _, s := range m.Samplers {
		refs = append(refs, s.State)
	}
	return refs
}

// open returns a reader over ref's object that fails with ErrCorrupt at
// EOF if the bytes do not match the manifest.
func openRef(ctx context.Context, b blobstore.Bucket, ref fileRef) (io.ReadCloser, *hashingReader, error) {
	r, err := b.Get(ctx, ref.Object)
	if err != nil {
		if errors.Is(err, blobstore.ErrNotFound) {
			return nil, nil, fmt.Errorf("%w: snapshot object %s missing: %v", ErrCorrupt, ref.Object, err)
		}
		return nil, nil, fmt.Errorf("persist: restore: %w", err)
	}
	return r, newHashingReader(r, ref), nil
}

// restoreDisk builds the snapshot's store in restoreDir (checkpoint files,
// then the cache file's records written into it, every digest checked,
// sampler states fetched), syncs it, and only then renames it to dbDir,
// syncs Dir and applies the sampler states. A failure at any point removes restoreDir and leaves Dir as
// it was; a crash leaves at most restoreDir, which the next Open removes.
// Either way no later Open can serve part of a snapshot.
func (s *Store) restoreDisk(ctx context.Context, b blobstore.Bucket, m *manifest) (map[string]bool, error) {
	fs := s.opts.FS
	dir, tmp := s.dbDir(), s.restoreDir()
	if names, err := fs.List(dir); err == nil && len(names) > 0 {
		return nil, fmt.Errorf("persist: restore into %s: directory already holds a store", dir)
	}
	if err := fs.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("persist: restore: remove %s: %w", tmp, err)
	}
	done := false
	defer func() {
		if !done {
			_ = fs.RemoveAll(tmp)
		}
	}()
	if err := durable.MkdirAll(fs, tmp); err != nil {
		return nil, fmt.Errorf("persist: restore: %w", err)
	}
	if err := downloadTree(ctx, b, m.DB, fs, tmp); err != nil {
		return nil, err
	}
	var states []fetchedState
	err := guardPebble(s.fatal, func() error {
		db, err := openPebble(ctx, fs, tmp, s.opts.PebbleCacheMB, s.fatal)
		if err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("%w: restore checkpoint: %w", ErrDiskFull, err)
			}
			return fmt.Errorf("%w: restore checkpoint: %v", ErrCorrupt, err)
		}
		states, err = s.fillRestoreDB(ctx, b, m, db)
		if err == nil {
			err = db.LogData(nil, pebble.Sync)
		}
		if s.fatal.failed() {
			return err // Pebble cannot continue: not closed (see closeResources)
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := fs.Remove(dir); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("persist: restore: remove empty %s: %w", dir, err)
	}
	if err := fs.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("persist: restore: rename %s to %s: %w", tmp, dir, err)
	}
	done = true
	if err := durable.SyncDir(fs, s.opts.Dir); err != nil {
		return nil, fmt.Errorf("persist: restore: %w", err)
	}
	return s.applySamplers(states)
}

// fillRestoreDB writes the snapshot's cache records into db (a record in
// the cache file may be newer than the checkpoint's copy, and is written
// after it), warms the cache with clean copies in Hybrid mode, fills the
// live set and fetches the sampler states.
func (s *Store) fillRestoreDB(ctx context.Context, b blobstore.Bucket, m *manifest, db *pebble.DB) ([]fetchedState, error) {
	batch := db.NewBatch()
	defer func() { batch.Close() }()
	err := s.readCache(ctx, b, m, func(key string, enc []byte, voff int) error {
		if err := batch.Set([]byte(key), enc, nil); err != nil {
			return fmt.Errorf("persist: restore: %w", err)
		}
		if batch.Len() > 64<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("persist: restore: %w", err)
			}
			batch.Close()
			batch = db.NewBatch()
		}
		if s.opts.Mode == Hybrid {
			s.warm(&centry{key: key, enc: enc, voff: voff})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return nil, fmt.Errorf("persist: restore: %w", err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("persist: restore scan: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		s.mu.live[string(it.Key())] = struct{}{}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("%w: restore scan: %v", ErrCorrupt, err)
	}
	return s.fetchSamplers(ctx, b, m)
}

// warm caches a clean record while restoring, dropping the least recently
// used entries (all clean: Pebble holds them) to stay within the limit.
func (s *Store) warm(e *centry) {
	if e.size() > s.limit {
		return
	}
	c := &s.mu.cache
	if old := c.m[e.key]; old != nil {
		c.remove(old)
	}
	for c.bytes+e.size() > s.limit {
		c.remove(c.head.prev)
	}
	c.put(e)
}

// restoreMemory loads the snapshot into the cache of a Memory store: the
// checkpoint through a scratch in-memory Pebble, then the cache file, then
// the sampler states. Nothing touches Dir.
func (s *Store) restoreMemory(ctx context.Context, b blobstore.Bucket, m *manifest) (map[string]bool, error) {
	put := func(key string, enc []byte, voff int) error {
		s.mu.live[key] = struct{}{}
		s.mu.cache.put(&centry{key: key, enc: enc, voff: voff, dirty: true})
		return nil
	}
	if len(m.DB) > 0 {
		if err := loadDBInto(ctx, b, m, put); err != nil {
			return nil, err
		}
	}
	if err := s.readCache(ctx, b, m, put); err != nil {
		return nil, err
	}
	states, err := s.fetchSamplers(ctx, b, m)
	if err != nil {
		return nil, err
	}
	return s.applySamplers(states)
}

// downloadTree writes refs under root, each file synced, then syncs every
// directory it wrote into.
func downloadTree(ctx context.Context, b blobstore.Bucket, refs []fileRef, fs vfs.FS, root string) error {
	dirs := map[string]bool{root: true}
	for _, ref := range refs {
		if err := ctx.Err(); err != nil {
			return err
		}
		dst := fs.PathJoin(root, ref.Path)
		for d := fs.PathDir(dst); !dirs[d]; d = fs.PathDir(d) {
			dirs[d] = true
		}
		if err := fs.MkdirAll(fs.PathDir(dst), 0o755); err != nil {
			return fmt.Errorf("persist: restore: %w", err)
		}
		if err := downloadTo(ctx, b, ref, fs, dst); err != nil {
			return err
		}
	}
	for d := range dirs {
		if err := durable.SyncDir(fs, d); err != nil {
			return fmt.Errorf("persist: restore: %w", err)
		}
	}
	// A new subdirectory's entry lives in its parent: sync parents too.
	for d := range dirs {
		if d != root {
			if err := durable.SyncDir(fs, fs.PathDir(d)); err != nil {
				return fmt.Errorf("persist: restore: %w", err)
			}
		}
	}
	return nil
}

func downloadTo(ctx context.Context, b blobstore.Bucket, ref fileRef, fs vfs.FS, dst string) error {
	r, hr, err := openRef(ctx, b, ref)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := fs.Create(dst, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("persist: restore create %s: %w", dst, err)
	}
	_, err = io.Copy(f, hr)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("persist: restore %s: %w", ref.Path, err)
	}
	return nil
}

// readCache streams the snapshot's cache file and calls put for each
// entry, least recently used first. The digest is checked only at EOF, so
// put must not make anything durable or visible that a later error could
// not take back: callers discard everything when readCache fails.
func (s *Store) readCache(ctx context.Context, b blobstore.Bucket, m *manifest, put func(key string, enc []byte, voff int) error) error {
	if m.Cache == nil {
		return nil
	}
	r, hr, err := openRef(ctx, b, *m.Cache)
	if err != nil {
		return err
	}
	defer r.Close()
	br := bufio.NewReaderSize(hr, 1<<20)
	magic := make([]byte, len(cacheMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != cacheMagic {
		return fmt.Errorf("%w: cache file: bad magic", ErrCorrupt)
	}
	if v, err := binary.ReadUvarint(br); err != nil || v != cacheVersion {
		return fmt.Errorf("%w: cache file: version %d", ErrCorrupt, v)
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("%w: cache file: count: %v", ErrCorrupt, err)
	}
	// No chunk is longer than the object the manifest declares: a damaged
	// length cannot make a large allocation.
	size := uint64(m.Cache.Size)
	readChunk := func(limit uint64) ([]byte, error) {
		l, err := binary.ReadUvarint(br)
		if err != nil || l > limit || l > size {
			return nil, fmt.Errorf("%w: cache file: length", ErrCorrupt)
		}
		buf := make([]byte, l)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("%w: cache file: %v", ErrCorrupt, err)
		}
		return buf, nil
	}
	maxRec := uint64(s.opts.MaxValueBytes) + 1<<20
	for i := uint64(0); i < n; i++ {
		key, err := readChunk(1 << 20)
		if err != nil {
			return err
		}
		enc, err := readChunk(maxRec)
		if err != nil {
			return err
		}
		voff, err := valueOffset(enc)
		if err != nil {
			return fmt.Errorf("cache file entry %d: %w", i, err)
		}
		if err := put(string(key), enc, voff); err != nil {
			return err
		}
	}
	// Drain to EOF so the digest is checked.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return err
	}
	return nil
}

// fetchedState is a snapshot's state for one of the store's samplers,
// downloaded and checked against its digest, not yet applied.
type fetchedState struct {
	slot  *samplerSlot
	um    encoding.BinaryUnmarshaler
	ref   samplerRef
	state []byte
}

// fetchSamplers downloads and checks the state of every sampler the
// snapshot holds and the store still has. It changes nothing: the
// Samplers are the caller's objects, so they are only changed
// (applySamplers) once the rest of the restore has succeeded.
func (s *Store) fetchSamplers(ctx context.Context, b blobstore.Bucket, m *manifest) ([]fetchedState, error) {
	var out []fetchedState
	for _, ref := range m.Samplers {
		i, ok := s.samplerIdx[ref.Name]
		if !ok {
			continue // a sampler this store no longer has
		}
		sl := s.mu.samplers[i]
		um, ok := sl.s.(encoding.BinaryUnmarshaler)
		if !ok {
			continue
		}
		if err := new(rand.PCG).UnmarshalBinary(ref.RNG); err != nil {
			return nil, fmt.Errorf("%w: restore sampler %q rng: %v", ErrCorrupt, ref.Name, err)
		}
		r, hr, err := openRef(ctx, b, ref.State)
		if err != nil {
			return nil, err
		}
		state, err := io.ReadAll(hr)
		r.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, fetchedState{slot: sl, um: um, ref: ref, state: state})
	}
	return out, nil
}

// applySamplers loads fetched states into the samplers and reports which
// were restored; each must index exactly the restored keys.
func (s *Store) applySamplers(states []fetchedState) (map[string]bool, error) {
	done := map[string]bool{}
	for _, st := range states {
		if err := st.um.UnmarshalBinary(st.state); err != nil {
			return nil, fmt.Errorf("persist: restore sampler %q: %w", st.ref.Name, err)
		}
		if err := st.slot.src.UnmarshalBinary(st.ref.RNG); err != nil {
			return nil, fmt.Errorf("%w: restore sampler %q rng: %v", ErrCorrupt, st.ref.Name, err)
		}
		if n := st.slot.s.Len(); n != len(s.mu.live) {
			return nil, fmt.Errorf("%w: sampler %q indexes %d keys, snapshot holds %d",
				ErrCorrupt, st.ref.Name, n, len(s.mu.live))
		}
		done[st.ref.Name] = true
	}
	return done, nil
}

// loadDBInto restores m's checkpoint into a scratch Pebble on an
// in-memory filesystem and calls put for every record.
func loadDBInto(ctx context.Context, b blobstore.Bucket, m *manifest, put func(key string, enc []byte, voff int) error) error {
	mem := vfs.NewMem()
	if err := downloadTree(ctx, b, m.DB, mem, "/db"); err != nil {
		return err
	}
	db, err := pebble.Open("/db", &pebble.Options{FS: mem, Logger: quietLogger{}})
	if err != nil {
		return fmt.Errorf("%w: restore checkpoint: %v", ErrCorrupt, err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("persist: restore scan: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		enc := append([]byte(nil), it.Value()...)
		voff, err := valueOffset(enc)
		if err == nil {
			err = put(string(it.Key()), enc, voff)
		}
		if err != nil {
			it.Close()
			return fmt.Errorf("restore record %q: %w", it.Key(), err)
		}
	}
	return it.Close()
}
