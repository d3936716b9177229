//go:build linux

package envsvc

import (
	"fmt"
	"os"
	"testing"
)

// TestRemoteMixedActionSpacesShm: TestRemoteMixedActionSpaces over shm://.
func TestRemoteMixedActionSpacesShm(t *testing.T) {
	if testing.Short() {
		t.Skip("trains PPO twice")
	}
	name := fmt.Sprintf("herdtest-mixed-%d", os.Getpid())
	startShm(t, name)
	sameSignalRun(t, "shm://"+name+"/toy/signal_v0?timeout=20s", "local")
}
