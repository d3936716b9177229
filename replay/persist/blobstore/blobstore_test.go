package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestFileBucket(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, "file://"+filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	body := []byte("hello snapshot")
	if err := b.Put(ctx, "a/b/c", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	// A short body must fail and leave nothing behind.
	if err := b.Put(ctx, "a/short", strings.NewReader("abc"), 10); err == nil {
		t.Fatal("short put accepted")
	}
	if ok, err := b.Exists(ctx, "a/short"); err != nil || ok {
		t.Fatalf("short put left an object: %v %v", ok, err)
	}
	r, err := b.Get(ctx, "a/b/c")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("got %q", got)
	}
	if _, err := b.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing object: %v", err)
	}
	if err := b.Put(ctx, "a/d", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	keys, err := b.List(ctx, "a/")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "a/b/c,a/d" {
		t.Fatalf("list: %v", keys)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "nourl"); !errors.Is(err, ErrBadURL) {
		t.Fatalf("no scheme: %v", err)
	}
	if _, err := Open(ctx, "ftp://host/x"); !errors.Is(err, ErrBadURL) {
		t.Fatalf("bad scheme: %v", err)
	}
	if _, err := Open(ctx, "file://"+filepath.ToSlash(filepath.Join(t.TempDir(), "missing"))); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("missing dir: %v", err)
	}
	if _, err := Open(ctx, "hdfs:///x"); !errors.Is(err, ErrBadURL) {
		t.Fatalf("hdfs without host: %v", err)
	}
}

// TestFileBucketPowerLoss puts objects into a bucket in a directory that
// does not exist yet, on Pebble's crashable in-memory filesystem, then
// keeps only what was synced: every object Put returned for must be
// there, whole, and listed.
func TestFileBucketPowerLoss(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	b, err := newFileBucket(fs, "/data/bucket", "run1/", true)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]string{"objects/ab12": "sstable bytes", "objects/cd34": "cache",
		"snapshots/00000000000000000001/MANIFEST.json": `{"id":1}`}
	for k, v := range objs {
		if err := b.Put(ctx, k, strings.NewReader(v), int64(len(v))); err != nil {
			t.Fatal(err)
		}
	}
	crashed, err := newFileBucket(fs.CrashClone(vfs.CrashCloneCfg{}), "/data/bucket", "run1/", false)
	if err != nil {
		t.Fatalf("bucket directory lost in a crash: %v", err)
	}
	for k, v := range objs {
		r, err := crashed.Get(ctx, k)
		if err != nil {
			t.Fatalf("%s lost in a crash: %v", k, err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if string(got) != v {
			t.Fatalf("%s after a crash: %q, want %q", k, got, v)
		}
	}
	keys, err := crashed.List(ctx, "snapshots/")
	if err != nil || len(keys) != 1 || keys[0] != "snapshots/00000000000000000001/MANIFEST.json" {
		t.Fatalf("list after a crash: %v %v", keys, err)
	}
}

func TestFileBucketURLAndKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, bad := range []string{"file://" + filepath.ToSlash(dir) + "?base_url=x", "file://host/x", "file://"} {
		if _, err := Open(ctx, bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("%s: %v, want ErrBadURL", bad, err)
		}
	}
	if _, err := Open(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "missing"))); !errors.Is(err, ErrUnreachable) {
		t.Errorf("missing directory: %v, want ErrUnreachable", err)
	}
	b, err := Open(ctx, "file://"+filepath.ToSlash(dir)+"?prefix=p/&create_dir=1")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"../x", "a//b", "/abs", "a/", "x.attrs", "a/./b"} {
		if err := b.Put(ctx, k, strings.NewReader("x"), 1); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
	if err := b.Put(ctx, "a/b", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "a", "b")); err != nil {
		t.Fatalf("prefix not applied: %v", err)
	}
	if keys, err := b.List(ctx, ""); err != nil || len(keys) != 1 || keys[0] != "a/b" {
		t.Fatalf("list: %v %v", keys, err)
	}
}
