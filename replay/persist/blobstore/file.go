package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/replay/persist/internal/durable"
)

// fileBucket serves file:// URLs. gocloud's fileblob syncs neither an
// object nor the directory naming it, so a snapshot it reported complete
// could vanish in a power loss; here Put writes a temporary file beside
// the object, syncs it, renames it into place and syncs the directory
// (and any directory it created), so an object Put returned for survives.
// Keys map to paths under the root as fileblob maps them (no escaping is
// needed for the keys persist writes; others are refused), so buckets
// written by either read the same. fileblob's ".attrs" sidecars are
// ignored.
type fileBucket struct {
	fs     vfs.FS
	root   string
	prefix string // prepended to every key (the URL's prefix parameter)
	tmp    atomic.Uint64
}

// fileParams are the file:// query parameters accepted: create_dir makes
// the root if missing, prefix scopes keys; metadata and no_tmp_dir are
// fileblob's and change nothing here (no sidecars are written; temporary
// files always sit beside their object).
var fileParams = map[string]bool{"create_dir": true, "prefix": true, "metadata": true, "no_tmp_dir": true}

func openFile(u *url.URL) (Bucket, error) {
	q := u.Query()
	for k := range q {
		if !fileParams[k] {
			return nil, fmt.Errorf("%w: file:// parameter %q not supported (want create_dir, prefix)", ErrBadURL, k)
		}
	}
	root := u.Path
	switch u.Host {
	case "", "localhost":
	case ".": // file://./rel/dir: a path relative to the working directory
		root = strings.TrimPrefix(root, "/")
	default:
		return nil, fmt.Errorf("%w: file:// host %q (want file:///abs/path or file://./rel/path)", ErrBadURL, u.Host)
	}
	if root == "" {
		return nil, fmt.Errorf("%w: file:// without a path", ErrBadURL)
	}
	return newFileBucket(vfs.Default, filepath.FromSlash(root), q.Get("prefix"), q.Get("create_dir") != "")
}

func newFileBucket(fs vfs.FS, root, prefix string, create bool) (*fileBucket, error) {
	if create {
		if err := durable.MkdirAll(fs, root); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
	}
	st, err := fs.Stat(root)
	if err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("%w: file bucket %s: %v", ErrUnreachable, root, err)
	}
	return &fileBucket{fs: fs, root: root, prefix: prefix}, nil
}

// name maps key to its path, refusing keys that would need escaping or
// could leave the root.
func (b *fileBucket) name(key string) (string, error) {
	k := b.prefix + key
	bad := k == "" || strings.HasPrefix(k, "/") || strings.HasSuffix(k, "/") || strings.HasSuffix(k, ".attrs") ||
		strings.ContainsFunc(k, func(r rune) bool { return r < 32 || r == '\\' })
	for _, seg := range strings.Split(k, "/") {
		bad = bad || seg == "" || seg == "." || seg == ".."
	}
	if bad {
		return "", fmt.Errorf("blobstore: file key %q not supported", k)
	}
	return b.fs.PathJoin(b.root, filepath.FromSlash(k)), nil
}

func (b *fileBucket) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dst, err := b.name(key)
	if err != nil {
		return err
	}
	dir := b.fs.PathDir(dst)
	if err := durable.MkdirAll(b.fs, dir); err != nil {
		return fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	tmp := dst + ".tmp-" + strconv.FormatUint(b.tmp.Add(1), 10) + "-" + strconv.Itoa(os.Getpid())
	f, err := b.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	n, err := io.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("short copy: %d of %d bytes", n, size)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = b.fs.Rename(tmp, dst)
	}
	if err != nil {
		_ = b.fs.Remove(tmp)
		return fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	if err := durable.SyncDir(b.fs, dir); err != nil {
		return fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	return nil
}

func (b *fileBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := b.name(key)
	if err != nil {
		return nil, err
	}
	if st, err := b.fs.Stat(p); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	f, err := b.fs.Open(p)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("blobstore: get %s: %w", key, err)
	}
	return f, nil
}

func (b *fileBucket) Exists(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	p, err := b.name(key)
	if err != nil {
		return false, err
	}
	st, err := b.fs.Stat(p)
	if errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("blobstore: exists %s: %w", key, err)
	}
	return !st.IsDir(), nil
}

// List walks the directory that holds every key under prefix and returns
// the keys found, skipping temporary files and fileblob sidecars.
func (b *fileBucket) List(ctx context.Context, prefix string) ([]string, error) {
	full := b.prefix + prefix
	start := ""
	if i := strings.LastIndex(full, "/"); i >= 0 {
		start = full[:i]
	}
	var keys []string
	var walk func(rel string) error
	walk = func(rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		names, err := b.fs.List(b.fs.PathJoin(b.root, filepath.FromSlash(rel)))
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("blobstore: list %s: %w", prefix, err)
		}
		for _, n := range names {
			k := path.Join(rel, n)
			st, err := b.fs.Stat(b.fs.PathJoin(b.root, filepath.FromSlash(k)))
			if errors.Is(err, iofs.ErrNotExist) {
				continue // removed while listing
			}
			if err != nil {
				return fmt.Errorf("blobstore: list %s: %w", prefix, err)
			}
			if st.IsDir() {
				if strings.HasPrefix(k+"/", full) || strings.HasPrefix(full, k+"/") {
					if err := walk(k); err != nil {
						return err
					}
				}
				continue
			}
			tmp := strings.Contains(n, ".tmp-") || strings.HasSuffix(n, ".tmp") // ours, fileblob's
			if tmp || strings.HasSuffix(n, ".attrs") || !strings.HasPrefix(k, full) {
				continue
			}
			keys = append(keys, strings.TrimPrefix(k, b.prefix))
		}
		return nil
	}
	if err := walk(start); err != nil {
		return nil, err
	}
	return keys, nil
}

func (b *fileBucket) Close() error { return nil }
