//go:build !(cloud || s3 || gcs || azblob)

package blobstore

import (
	"context"
	"net/url"
)

// openCloud: this build has no gocloud.dev backend (see Build tags).
func openCloud(_ context.Context, u *url.URL, _ string) (Bucket, error) {
	return nil, errLeftOut(u)
}
