package service

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc"
)

// Run refuses a message limit that means nothing and a bad address, and
// ends with an error wrapping the cause when its context ends.
func TestRun(t *testing.T) {
	ctx := context.Background()
	if err := Run(ctx, io.Discard, "x", ServeOptions{Addr: "127.0.0.1:0", MaxMessageMB: 0}, func(*grpc.Server) {}); err == nil {
		t.Error("--max-message-mb 0 was accepted")
	}
	if err := Run(ctx, io.Discard, "x", ServeOptions{Addr: "127.0.0.1:bad", MaxMessageMB: 1}, func(*grpc.Server) {}); err == nil {
		t.Error("a bad address was accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := Run(cctx, io.Discard, "x", ServeOptions{Addr: "127.0.0.1:0", MaxMessageMB: 1}, func(*grpc.Server) {})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled serve returned %v, want context.Canceled", err)
	}
}
