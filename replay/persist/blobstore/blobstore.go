// Package blobstore is the byte carrier for replay/persist snapshots: a small
// Bucket interface with three adapters: one for local directories (file://,
// file.go: synced, unlike gocloud's fileblob), one over gocloud.dev/blob
// (s3://, gs://, azblob://, opened from a URL) and one over HDFS
// (hdfs://namenode:port/path, github.com/colinmarc/hdfs/v2).
//
// # Build tags
//
// The default build has file:// only, so that a plain `go build ./cmd/herd`
// downloads and compiles none of the cloud SDKs. The other backends are
// build tags: cloud (all of them), or one each: s3, gcs, azblob, hdfs.
//
//	go build -tags cloud ./cmd/herd
//	go test -tags cloud ./replay/persist/...
//
// A URL whose backend was left out is an ErrBadURL naming the tag.
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
// file:// goes to the file adapter, hdfs:// to the HDFS adapter, everything
// else to gocloud.dev's URL mux (see its docs for query options such as
// s3's endpoint, region, use_path_style, disable_https, and the generic
// prefix), each when the build includes it (see Build tags).
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
	return openCloud(ctx, u, rawURL)
}

// schemeTags names the build tag of each optional scheme.
var schemeTags = map[string]string{"s3": "s3", "gs": "gcs", "azblob": "azblob", "hdfs": "hdfs"}

// errLeftOut is the error for a URL whose scheme this build lacks.
func errLeftOut(u *url.URL) error {
	tag, ok := schemeTags[u.Scheme]
	if !ok {
		return fmt.Errorf("%w: unknown scheme %q in %q (file://, s3://, gs://, azblob://, hdfs://)", ErrBadURL, u.Scheme, redact(u))
	}
	return fmt.Errorf("%w: %s:// snapshots are not in this build of herd; build it with -tags cloud (or -tags %s), e.g. go build -tags cloud ./cmd/herd",
		ErrBadURL, u.Scheme, tag)
}

// redact drops the query, which may carry credentials, from error messages.
func redact(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	c.User = nil
	return c.String()
}
