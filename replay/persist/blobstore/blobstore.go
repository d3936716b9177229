// Package blobstore is the byte carrier for replay/persist snapshots: a small
// Bucket interface with three adapters: one over gocloud.dev/blob (s3://,
// gs://, azblob://, opened from a URL), one for local directories
// (file://, file.go: synced, unlike gocloud's fileblob) and one over HDFS
// (hdfs://namenode:port/path, github.com/colinmarc/hdfs/v2).
//
// # Contract
//
// Put is atomic: a reader sees either no object or the whole object, never a
// prefix. Object stores commit on Close; the file and HDFS adapters write a
// temporary file and rename it. Put is durable when it returns: object
// stores and HDFS acknowledge only stored (replicated) objects, and the
// file adapter syncs the file and the directories naming it first. The snapshot writer
// relies on both to make "manifest written last" mean "snapshot complete",
// across power loss too.
//
// Every method may be called from any goroutine. Errors that mean "no such
// object" satisfy errors.Is(err, ErrNotFound); Open returns an error wrapping
// ErrUnreachable when the bucket cannot be listed.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	_ "gocloud.dev/blob/gcsblob"   // gs:// URLs
	_ "gocloud.dev/blob/s3blob"    // s3:// URLs
	"gocloud.dev/gcerrors"
)

var (
	// ErrNotFound marks a Get of an object that does not exist.
	ErrNotFound = errors.New("blobstore: not found")
	// ErrUnreachable marks a bucket that could not be opened or listed.
	ErrUnreachable = errors.New("blobstore: bucket unreachable")
	// ErrBadURL marks a URL with an unknown scheme or missing parts.
	ErrBadURL = errors.New("blobstore: bad url")
)

// Bucket is the storage a snapshot is uploaded to.
type Bucket interface {
	// Put stores the size bytes read from r under key, atomically.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens key for reading; the caller closes the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Exists reports whether key is stored.
	Exists(ctx context.Context, key string) (bool, error)
	// List returns every key that starts with prefix, in no set order.
	List(ctx context.Context, prefix string) ([]string, error)
	// Close releases the connection.
	Close() error
}

// Open opens the bucket named by rawURL and checks that it can be listed.
// hdfs:// goes to the HDFS adapter, everything else to gocloud.dev's URL
// mux (see its docs for query options such as s3's endpoint, region,
// use_path_style, disable_https, and the generic prefix).
func Open(ctx context.Context, rawURL string) (Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q", ErrBadURL, rawURL)
	}
	switch u.Scheme {
	case "hdfs":
		return openHDFS(u)
	case "file":
		return openFile(u)
	}
	if !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		return nil, fmt.Errorf("%w: unknown scheme %q in %q", ErrBadURL, u.Scheme, rawURL)
	}
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: open %q: %v", ErrUnreachable, redact(u), err)
	}
	ok, err := b.IsAccessible(ctx)
	if err != nil || !ok {
		_ = b.Close()
		if err == nil {
			err = errors.New("bucket does not exist")
		}
		return nil, fmt.Errorf("%w: %q: %v", ErrUnreachable, redact(u), err)
	}
	return &cloudBucket{b: b}, nil
}

// redact drops the query, which may carry credentials, from error messages.
func redact(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	c.User = nil
	return c.String()
}

type cloudBucket struct{ b *blob.Bucket }

func (c *cloudBucket) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	// Cancelling ctx before Close aborts the write, so a failed copy never
	// leaves a partial object behind.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	n, err := io.Copy(w, r)
	if err == nil && n != size {
		err = fmt.Errorf("short copy: %d of %d bytes", n, size)
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	return nil
}

func (c *cloudBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := c.b.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("blobstore: get %s: %w", key, err)
	}
	return r, nil
}

func (c *cloudBucket) Exists(ctx context.Context, key string) (bool, error) {
	ok, err := c.b.Exists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("blobstore: exists %s: %w", key, err)
	}
	return ok, nil
}

func (c *cloudBucket) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := c.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("blobstore: list %s: %w", prefix, err)
		}
		if !o.IsDir && !strings.HasSuffix(o.Key, "/") {
			keys = append(keys, o.Key)
		}
	}
}

func (c *cloudBucket) Close() error { return c.b.Close() }
