//go:build cloud || hdfs

package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/colinmarc/hdfs/v2"
)

// hdfsBucket stores key k at <root>/k. The HDFS client has no context
// support, so ctx is only checked between calls.
type hdfsBucket struct {
	c    *hdfs.Client
	root string
	tmp  atomic.Uint64 // names temporary files; unique within this process
}

func openHDFS(u *url.URL) (Bucket, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: hdfs url needs a namenode host:port", ErrBadURL)
	}
	c, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{u.Host}, User: u.User.Username()})
	if err != nil {
		return nil, fmt.Errorf("%w: hdfs %s: %v", ErrUnreachable, u.Host, err)
	}
	root := path.Clean("/" + u.Path)
	if err := c.MkdirAll(root, 0o755); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: hdfs mkdir %s: %v", ErrUnreachable, root, err)
	}
	return &hdfsBucket{c: c, root: root}, nil
}

func (h *hdfsBucket) name(key string) string { return path.Join(h.root, key) }

func (h *hdfsBucket) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dst := h.name(key)
	if err := h.c.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("blobstore: hdfs put %s: %w", key, err)
	}
	// Write beside the destination, then rename: HDFS rename is atomic.
	tmp := dst + ".tmp-" + strconv.FormatUint(h.tmp.Add(1), 10) + "-" + strconv.Itoa(os.Getpid())
	w, err := h.c.Create(tmp)
	if err != nil {
		return fmt.Errorf("blobstore: hdfs put %s: %w", key, err)
	}
	n, err := io.Copy(w, r)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("short copy: %d of %d bytes", n, size)
	}
	if err == nil {
		_ = h.c.Remove(dst) // HDFS rename does not overwrite
		err = h.c.Rename(tmp, dst)
	}
	if err != nil {
		_ = h.c.Remove(tmp)
		return fmt.Errorf("blobstore: hdfs put %s: %w", key, err)
	}
	return nil
}

func (h *hdfsBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := h.c.Open(h.name(key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("blobstore: hdfs get %s: %w", key, err)
	}
	return f, nil
}

func (h *hdfsBucket) Exists(ctx context.Context, key string) (bool, error) {
	_, err := h.c.Stat(h.name(key))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("blobstore: hdfs stat %s: %w", key, err)
}

func (h *hdfsBucket) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := h.c.Walk(h.root, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if info.IsDir() || strings.Contains(path.Base(p), ".tmp-") {
			return nil
		}
		k := strings.TrimPrefix(strings.TrimPrefix(p, h.root), "/")
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("blobstore: hdfs list %s: %w", prefix, err)
	}
	return keys, nil
}

func (h *hdfsBucket) Close() error { return h.c.Close() }
