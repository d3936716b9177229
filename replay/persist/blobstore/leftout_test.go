//go:build !(cloud || s3)

package blobstore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A default build has no S3 backend: an s3:// URL is refused at once,
// naming the build tag that adds it and never echoing the query.
func TestLeftOutSchemeNamesTheTag(t *testing.T) {
	_, err := Open(context.Background(), "s3://bucket?region=x&secret=hunter2")
	if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "-tags cloud") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("s3:// in a default build: %v, want ErrBadURL naming -tags cloud without the query", err)
	}
}
