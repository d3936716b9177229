package envsvc_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"herd/env"
	"herd/env/remote"
	"herd/service"
	"herd/service/envsvc"
)

// Serve herd's envs on a loopback port (what `herd serve env` does) and
// step 8 CartPoles there with one message per batch.
func Example() {
	lis, err := service.Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	g := grpc.NewServer(service.ServerOptions(nil, 0)...)
	envsvc.New(envsvc.Config{}).Register(g)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Serve(ctx, g, lis, time.Second) }()
	defer func() { stop(); <-done }()

	v, err := env.Maker{Remote: remote.Opener{}}.MakeVector("grpc://"+lis.Addr().String()+"/CartPole-v1", 8, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		panic(err)
	}
	defer v.Close()
	if _, err := v.Reset(42); err != nil {
		panic(err)
	}
	actions := make([]float32, 8) // always push left: episodes end fast
	episodes := 0
	for range 200 {
		b, err := v.Step(actions)
		if err != nil {
			panic(err)
		}
		for i := range 8 {
			if b.Infos[i].HasEpisode {
				episodes++
			}
		}
	}
	fmt.Println(v.ObservationSpace().Dim(), v.ActionSpace(), episodes > 8)
	// Output: 4 Discrete(2, start=0) true
}
