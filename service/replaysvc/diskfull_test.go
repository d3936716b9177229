package replaysvc

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/replay/persist"
	"herd/service"
)

// Flush makes writeback records durable on request; on a full disk Flush
// and every later Push answer RESOURCE_EXHAUSTED instead of the server
// panicking, and reads go on.
func TestFlushAndFullDisk(t *testing.T) {
	full := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(op.Path, "/store") {
			return fmt.Errorf("write %s: %w", op.Path, syscall.ENOSPC)
		}
		return nil
	})}
	opts := persist.Options{Mode: persist.Hybrid, Dir: "/store", FS: errorfs.Wrap(vfs.NewMem(), full), CacheMB: 64,
		Durability: persist.WriteBack, Samplers: []persist.Sampler{persist.NewUniform("uniform")}}
	store, err := persist.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Store: store, Samplers: opts.Samplers, Mode: opts.Mode})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := service.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(service.ServerOptions(nil, 0)...)
	srv.Register(g)
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Serve(sctx, g, lis, time.Second) }()
	defer func() {
		stop()
		<-done
		store.Close()
	}()
	c := dial(t, lis.Addr().String(), 10*time.Second)
	ctx := context.Background()
	push := func(from, n int) error {
		var recs []Record
		for i := from; i < from+n; i++ {
			recs = append(recs, Record{Key: fmt.Sprintf("k%04d", i), Value: value(i, 1000)})
		}
		return c.Push(ctx, recs)
	}
	if err := push(0, 100); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Flush(ctx); err != nil || n != 100 {
		t.Fatalf("flush: %d, %v", n, err)
	}
	full.On()
	if err := push(100, 100); err != nil {
		t.Fatal(err) // writeback: queued in the cache
	}
	if _, err := c.Flush(ctx); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("flush on a full disk: %v, want RESOURCE_EXHAUSTED", err)
	}
	if err := push(200, 1); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("push after the disk filled: %v, want RESOURCE_EXHAUSTED", err)
	}
	if got, err := c.Get(ctx, []string{"k0003"}, false); err != nil || len(got) != 1 {
		t.Fatalf("read after the disk filled: %v", err)
	}
}
