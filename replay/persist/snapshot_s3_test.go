//go:build cloud || s3

package persist

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"herd/replay/persist/blobstore"
)

// fakeS3 starts an in-process S3 server (gofakes3, memory backend) with one
// bucket and returns an s3:// URL for it. The same URL shape works against
// Versity S3 Gateway or any S3 API: see docs/ARCHITECTURE.md.
func fakeS3(t *testing.T) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("herd"); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(ts.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return "s3://herd?endpoint=" + ts.URL + "&use_path_style=true&region=us-east-1&disable_https=true" +
		"&request_checksum_calculation=when_required&response_checksum_validation=when_required&prefix=run1/"
}

// TestSnapshotRestoreS3 is TestSnapshotRestoreFile against a real S3 API.
func TestSnapshotRestoreS3(t *testing.T) { testSnapshotRestore(t, fakeS3(t)) }

func TestUnreachableBucket(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ts := httptest.NewServer(nil)
	addr := ts.URL
	ts.Close() // nothing listens there now
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := Open(cctx, Options{Mode: Memory, SnapshotURL: "s3://nope?endpoint=" + addr +
		"&use_path_style=true&region=us-east-1&disable_https=true"})
	if !errors.Is(err, blobstore.ErrUnreachable) {
		t.Fatalf("unreachable bucket: %v", err)
	}
}
