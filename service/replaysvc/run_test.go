package replaysvc

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/service"
)

// Run refuses bad settings before it opens the store, naming the flag.
func TestRunRefusesBadSettings(t *testing.T) {
	ok := RunOptions{Serve: service.ServeOptions{Addr: "127.0.0.1:0", MaxMessageMB: 1}, Mode: "memory", Durability: "writeback", MaxBatch: 1}
	for want, change := range map[string]func(*RunOptions){
		"--max-batch":  func(o *RunOptions) { o.MaxBatch = 0 },
		"--durability": func(o *RunOptions) { o.Durability = "never" },
		"mode":         func(o *RunOptions) { o.Mode = "tape" },
		"sampler":      func(o *RunOptions) { o.Samplers = []string{"x=bogus"} },
	} {
		o := ok
		change(&o)
		err := Run(context.Background(), io.Discard, o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v", want, err)
		}
	}
}

// A `serve replay` that fails — its address unusable, its TLS files
// missing, its restore source empty — leaves no DIR/db (nor a DIR it
// created) behind; a DIR that was there stays.
func TestRunFailureLeavesNoStore(t *testing.T) {
	base := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for name, change := range map[string]func(*RunOptions){
		"address in use": func(o *RunOptions) { o.Serve.Addr = busy.Addr().String() },
		"bad address":    func(o *RunOptions) { o.Serve.Addr = "127.0.0.1:99999" },
		"missing cert": func(o *RunOptions) {
			o.Serve.TLS.Cert, o.Serve.TLS.Key = filepath.Join(base, "no.pem"), filepath.Join(base, "no.key")
		},
		"empty restore": func(o *RunOptions) { o.Store.RestoreFrom = "file://" + filepath.Join(base, "nothing") },
	} {
		for _, existing := range []bool{false, true} {
			dir := filepath.Join(base, "new", "store")
			if existing {
				dir = filepath.Join(base, "existing")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			o := RunOptions{Serve: service.ServeOptions{Addr: "127.0.0.1:0", MaxMessageMB: 1}, Mode: "hybrid", Durability: "writeback", MaxBatch: 1}
			o.Store.Dir = dir
			change(&o)
			if err := Run(context.Background(), io.Discard, o); err == nil {
				t.Fatalf("%s: Run succeeded", name)
			}
			if existing {
				if _, err := os.Stat(filepath.Join(dir, "db")); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s: %s/db left behind (%v)", name, dir, err)
				}
				if _, err := os.Stat(dir); err != nil {
					t.Errorf("%s: the existing %s was removed: %v", name, dir, err)
				}
			} else if _, err := os.Stat(filepath.Join(base, "new")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: %s left behind (%v)", name, filepath.Join(base, "new"), err)
			}
		}
	}
}
