//go:build linux

package envsvc

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd/internal/shmwire"
	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// TestShmOldClient: a client of the previous segment layout (HERDSHM1)
// is refused with an error naming both layouts, not a step on a segment
// whose arrays lie elsewhere.
func TestShmOldClient(t *testing.T) {
	name := fmt.Sprintf("herdtest-old-%d", os.Getpid())
	startShm(t, name)
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: shmwire.SocketName(name), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	open := &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Open{Open: &herdv1.OpenRequest{
		ProtocolVersion: service.ProtocolVersion, EnvId: "CartPole-v1", NumEnvs: 1, Autoreset: true}}}
	if err := shmwire.WriteMsg(c, open); err != nil {
		t.Fatal(err)
	}
	var tag [1]byte
	resp := new(herdv1.EnvResponse)
	if _, err := io.ReadFull(c, tag[:]); err != nil || tag[0] != shmwire.Msg {
		t.Fatalf("open answer %q %v", tag[0], err)
	}
	if err := shmwire.ReadFrame(c, resp); err != nil || resp.GetOpen() == nil {
		t.Fatalf("open: %v %v", resp, err)
	}
	l := shmwire.NewLayout(1, 4, 1, false)
	fd, err := unix.MemfdCreate("herd-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(l.Size)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, l.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	l.WriteHeader(mem)
	copy(mem, "HERDSHM1")
	if _, err := c.Write([]byte{shmwire.Map}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.WriteMsgUnix([]byte{shmwire.FD}, unix.UnixRights(fd), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, tag[:]); err != nil || tag[0] != shmwire.Msg {
		t.Fatalf("answer to an old segment %q %v, want an error message", tag[0], err)
	}
	resp.Reset()
	if err := shmwire.ReadFrame(c, resp); err != nil {
		t.Fatal(err)
	}
	if msg := resp.GetError().GetMessage(); !strings.Contains(msg, `"HERDSHM1"`) || !strings.Contains(msg, `"HERDSHM2"`) {
		t.Fatalf("refusal %q does not name both layouts", msg)
	}
}
