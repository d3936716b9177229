package replaysvc_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"herd/replay/persist"
	"herd/service"
	"herd/service/replaysvc"
)

// Serve an in-memory store on a loopback port and use it through the Go
// client: what `herd serve replay --mode memory` and an actor do.
func Example() {
	ctx := context.Background()
	samplers := []persist.Sampler{persist.NewPrioritized("per", "priority", 1)}
	store, err := persist.Open(ctx, persist.Options{Mode: persist.Memory, Samplers: samplers, Seed: 1})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	srv, err := replaysvc.New(replaysvc.Config{Store: store, Samplers: samplers, Mode: persist.Memory})
	if err != nil {
		panic(err)
	}
	lis, err := service.Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	g := grpc.NewServer(service.ServerOptions(nil, 0)...)
	srv.Register(g)
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- service.Serve(sctx, g, lis, time.Second) }()
	defer func() { stop(); <-done }()

	c, err := replaysvc.Dial(lis.Addr().String(), replaysvc.ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	err = c.Push(ctx, []replaysvc.Record{
		{Key: "s1", Value: []byte("transition 1"), Fields: map[string]float64{"priority": 0}},
		{Key: "s2", Value: []byte("transition 2"), Fields: map[string]float64{"priority": 5}},
	})
	if err != nil {
		panic(err)
	}
	batch, err := c.Sample(ctx, 2, "per") // priority 0 is never drawn
	if err != nil {
		panic(err)
	}
	for _, r := range batch {
		fmt.Println(r.Key, string(r.Value))
	}
	// Output:
	// s2 transition 2
	// s2 transition 2
}
