//go:build linux

package envsvc

import (
	"context"
	"fmt"
	"os"
	"testing"

	"herd/internal/pyproc"
)

// TestRemoteMasksAndStateShm: over shm:// (the multi-agent messages
// framed on the socket), herd's Go server and the Python server carry
// MaskedWalk's masks and global state as over gRPC: the same checks as
// TestRemoteMasksAndStateGo and TestPythonMasksAndState.
func TestRemoteMasksAndStateShm(t *testing.T) {
	name := fmt.Sprintf("herdtest-mask-%d", os.Getpid())
	lis, err := ListenShm(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- New(Config{MaxEnvs: 64, MaxSessions: 8, ParallelEnvs: maskedWalkEnvs}).ServeShm(ctx, lis)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve shm: %v", err)
		}
	})
	checkMaskedWalk(t, "shm://"+name+"/MaskedWalk?timeout=20s")

	py := shmName(t)
	pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:MaskedWalk", "--shm", py)
	checkMaskedWalk(t, "shm://"+py+"/MaskedWalk?timeout=20s")
}
