package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"
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
