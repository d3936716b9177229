package envsvc

import (
	"context"
	"io"
	"strings"
	"testing"

	"herd/service"
)

// Run refuses limits below one before it listens, naming the flag.
func TestRunRefusesBadLimits(t *testing.T) {
	so := service.ServeOptions{Addr: "127.0.0.1:0", MaxMessageMB: 1}
	for flag, c := range map[string]Config{
		"--max-envs":     {MaxEnvs: 0, MaxSessions: 1},
		"--max-sessions": {MaxEnvs: 1, MaxSessions: 0},
	} {
		err := Run(context.Background(), io.Discard, RunOptions{Serve: so, Config: c})
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%+v: err %v, want one naming %s", c, err, flag)
		}
	}
}
