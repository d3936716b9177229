package persist

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/replay/persist/blobstore"
)

// latestManifest reads the newest complete snapshot's manifest. Objects
// of a snapshot whose manifest was never written are simply not listed.
func latestManifest(ctx context.Context, b blobstore.Bucket) (*manifest, error) {
	ids, err := manifestIDs(ctx, b)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, ErrNoSnapshot
	}
	key := manifestKey(ids[len(ids)-1])
	r, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("persist: restore %s: %w", key, err)
	}
	defer r.Close()
	dec := json.NewDecoder(io.LimitReader(r, 256<<20))
	dec.DisallowUnknownFields()
	var m manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, key, err)
	}
	if m.Format != manifestFormat || m.Version != manifestVersion {
		return nil, fmt.Errorf("%w: manifest %s: format %q version %d, want %q %d",
			ErrCorrupt, key, m.Format, m.Version, manifestFormat, manifestVersion)
	}
	for _, f := range append(m.DB, derefs(m)...) {
		if f.Path == "" || strings.Contains(f.Path, "..") || path.IsAbs(f.Path) || f.Size < 0 ||
			f.Object != "objects/"+f.SHA256 {
			return nil, fmt.Errorf("%w: manifest %s: bad file entry %+v", ErrCorrupt, key, f)
		}
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
	return r, &hashingReader{r: r, h: sha256.New(), want: ref}, nil
}

// downloadDB writes the checkpoint files into Dir/db, which must be empty.
func (s *Store) downloadDB(ctx context.Context, b blobstore.Bucket, m *manifest) error {
	fs := s.opts.FS
	dir := s.dbDir()
	if names, err := fs.List(dir); err == nil && len(names) > 0 {
		return fmt.Errorf("persist: restore into %s: directory already holds a store", dir)
	}
	for _, ref := range m.DB {
		if err := ctx.Err(); err != nil {
			return err
		}
		dst := fs.PathJoin(dir, ref.Path)
		if err := fs.MkdirAll(fs.PathDir(dst), 0o755); err != nil {
			return fmt.Errorf("persist: restore: %w", err)
		}
		if err := downloadTo(ctx, b, ref, fs, dst); err != nil {
			return err
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

// loadCache reads the snapshot's cache file into the store: the cache in
// Memory and Hybrid modes (evicting as needed), Pebble in Disk mode.
// Entries count as dirty: they may be newer than Pebble's copy.
func (s *Store) loadCache(ctx context.Context, b blobstore.Bucket, m *manifest) error {
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
	readChunk := func(limit uint64) ([]byte, error) {
		l, err := binary.ReadUvarint(br)
		if err != nil || l > limit {
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
		k := string(key)
		s.mu.live[k] = struct{}{}
		e := &centry{key: k, enc: enc, voff: voff, dirty: true}
		switch {
		case s.opts.Mode == Disk || (s.opts.Mode == Hybrid && e.size() > s.limit):
			if err := s.db.Set(key, enc, nil); err != nil {
				return fmt.Errorf("persist: restore: %w", err)
			}
		case s.opts.Mode == Hybrid:
			if err := s.evictTo(s.limit - e.size()); err != nil {
				return err
			}
			s.mu.cache.put(e)
		default:
			s.mu.cache.put(e)
		}
	}
	// Drain to EOF so the digest is checked.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return err
	}
	return nil
}

// loadSamplers restores the state of every sampler the snapshot holds and
// the store still has, and reports which were restored.
func (s *Store) loadSamplers(ctx context.Context, b blobstore.Bucket, m *manifest) (map[string]bool, error) {
	done := map[string]bool{}
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
		r, hr, err := openRef(ctx, b, ref.State)
		if err != nil {
			return nil, err
		}
		state, err := io.ReadAll(hr)
		r.Close()
		if err != nil {
			return nil, err
		}
		if err := um.UnmarshalBinary(state); err != nil {
			return nil, fmt.Errorf("persist: restore sampler %q: %w", ref.Name, err)
		}
		if err := sl.src.UnmarshalBinary(ref.RNG); err != nil {
			return nil, fmt.Errorf("%w: restore sampler %q rng: %v", ErrCorrupt, ref.Name, err)
		}
		if sl.s.Len() != len(s.mu.live) {
			return nil, fmt.Errorf("%w: sampler %q indexes %d keys, snapshot holds %d",
				ErrCorrupt, ref.Name, sl.s.Len(), len(s.mu.live))
		}
		done[ref.Name] = true
	}
	return done, nil
}

// loadDBIntoMemory restores m's checkpoint into a scratch Pebble on an
// in-memory filesystem and copies every record into the cache.
func (s *Store) loadDBIntoMemory(ctx context.Context, b blobstore.Bucket, m *manifest) error {
	mem := vfs.NewMem()
	for _, ref := range m.DB {
		dst := mem.PathJoin("/db", ref.Path)
		if err := mem.MkdirAll(mem.PathDir(dst), 0o755); err != nil {
			return err
		}
		if err := downloadTo(ctx, b, ref, mem, dst); err != nil {
			return err
		}
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
		if err != nil {
			it.Close()
			return fmt.Errorf("restore record %q: %w", it.Key(), err)
		}
		k := string(it.Key())
		s.mu.live[k] = struct{}{}
		s.mu.cache.put(&centry{key: k, enc: enc, voff: voff, dirty: true})
	}
	return it.Close()
}
