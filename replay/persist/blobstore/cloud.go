//go:build cloud || s3 || gcs || azblob

package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// openCloud opens rawURL through gocloud.dev's URL mux, which knows the
// schemes whose files (s3.go, gcs.go, azblob.go) this build includes.
func openCloud(ctx context.Context, u *url.URL, rawURL string) (Bucket, error) {
	if !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		return nil, errLeftOut(u)
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
