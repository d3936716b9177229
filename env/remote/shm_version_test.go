//go:build linux

package remote

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd/env"
	"herd/internal/shmwire"
	herdv1 "herd/proto/herd/v1"
)

// TestShmOldServer: a server of the previous segment layout refuses the
// segment as a header mismatch, which is all it can say; the client's
// error then says that the server may be older and must be updated.
func TestShmOldServer(t *testing.T) {
	name := fmt.Sprintf("herdtest-oldsrv-%d", os.Getpid())
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: shmwire.SocketName(name), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	served := make(chan error, 1)
	go func() { served <- oldServer(lis) }()
	_, err = Opener{}.Make("shm://"+name+"/Old?timeout=20s", env.Options{})
	if err == nil || !strings.Contains(err.Error(), "header does not match") || !strings.Contains(err.Error(), "older herd_env or herd") {
		t.Fatalf("open on an old server: %v, want the mismatch and the hint", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// oldServer answers one session as a server of layout HERDSHM1 would
// answer this client's segment: open, then a refusal of the segment.
func oldServer(lis *net.UnixListener) error {
	c, err := lis.AcceptUnix()
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var tag [1]byte
	if _, err := io.ReadFull(c, tag[:]); err != nil {
		return err
	}
	if err := shmwire.ReadFrame(c, new(herdv1.EnvRequest)); err != nil {
		return err
	}
	box := &herdv1.Space{Kind: &herdv1.Space_Box{Box: &herdv1.Box{Low: make([]float32, 4), High: []float32{1, 1, 1, 1}}}}
	act := &herdv1.Space{Kind: &herdv1.Space_Discrete{Discrete: &herdv1.Discrete{N: 2}}}
	if err := shmwire.WriteMsg(c, &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_Open{Open: &herdv1.OpenResponse{
		ObservationSpace: box, ActionSpace: act, NumEnvs: 1}}}); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, tag[:]); err != nil || tag[0] != shmwire.Map {
		return fmt.Errorf("want Map, got %q %v", tag[0], err)
	}
	oob := make([]byte, unix.CmsgSpace(4))
	if _, oobn, _, _, err := c.ReadMsgUnix(tag[:], oob); err != nil {
		return err
	} else if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	return shmwire.WriteMsg(c, &herdv1.EnvResponse{Error: &herdv1.Status{Code: 3,
		Message: "shmwire: malformed: segment header does not match the session (1 envs, obs 4, action 1)"}})
}
