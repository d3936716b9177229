package replaysvc

import (
	"context"
	"io"
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
