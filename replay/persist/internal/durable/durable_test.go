package durable

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestMkdirAll checks that every directory it creates survives a
// crash that keeps nothing unsynced, and that an existing but unsynced
// target (left by a crashed earlier call) is made durable too.
func TestMkdirAll(t *testing.T) {
	fs := vfs.NewCrashableMem()
	if err := fs.MkdirAll("/a", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fs, "/"); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(fs, "/a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll("/a/x", 0o755); err != nil { // created, never synced
		t.Fatal(err)
	}
	if err := MkdirAll(fs, "/a/x"); err != nil {
		t.Fatalf("existing dir: %v", err)
	}
	clone := fs.CrashClone(vfs.CrashCloneCfg{})
	for _, d := range []string{"/a", "/a/b", "/a/b/c", "/a/b/c/d", "/a/x"} {
		if _, err := clone.Stat(d); err != nil {
			t.Errorf("%s lost in a crash: %v", d, err)
		}
	}
	f, err := fs.Create("/a/file", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := MkdirAll(fs, "/a/file/x"); err == nil {
		t.Fatal("mkdir under a file succeeded")
	}
}
