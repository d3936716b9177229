//go:build linux

package env

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	herdv1 "herd/proto/herd/v1"
)

// The shm wire's socket bytes. Client to server: 'P' and a framed
// EnvRequest, 'M' with the segment's file descriptor, 'S' to step the
// actions in the segment ('M' is followed by a byte 'F' carrying the
// descriptor). Server to client: 'P' and a framed EnvResponse,
// 'm' once the segment is mapped, 's' once the step's results are in it.
const (
	shmMsg      = 'P'
	shmMap      = 'M'
	shmMapped   = 'm'
	shmStep     = 'S'
	shmStepped  = 's'
	shmMagic    = "HERDSHM1"
	shmMaxFrame = 64 << 20
)

// shmLayout is where each array lives in the segment (python/herd_env/shm.py
// computes the same): a 64-byte header (magic, n, obs dim, action dim as
// little-endian uint32s), then actions and observations (float32), final
// observations (float32, row i meaningful when env i's episode ended),
// rewards (float64), terminated and truncated (one byte each), each array
// starting at a multiple of 8.
type shmLayout struct {
	act, obs, final, rew, term, trunc, size int
}

func align8(x int) int { return (x + 7) &^ 7 }

func newShmLayout(n, od, ad int) shmLayout {
	var l shmLayout
	l.act = 64
	l.obs = l.act + align8(4*n*ad)
	l.final = l.obs + align8(4*n*od)
	l.rew = l.final + align8(4*n*od)
	l.term = l.rew + 8*n
	l.trunc = l.term + align8(n)
	l.size = (l.trunc + align8(n) + 4095) &^ 4095
	return l
}

// shmWire is one session over a Unix-domain socket with its data in a
// shared memory segment.
type shmWire struct {
	c       *net.UnixConn
	timeout time.Duration
	mem     []byte
	n       int
	act     []float32
	obs     []float32
	final   []float32
	rew     []float64
	term    []byte
	trunc   []byte
	od, ad  int
	stepped bool // the last send was a step through the segment
	resp    herdv1.EnvResponse
	msg     herdv1.EnvResponse_Batch
	batch   herdv1.Batch
	hdr     [5]byte
}

func dialShm(t remoteTarget) (*shmWire, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: "@herd-env-" + t.addr, Net: "unix"})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "no herd env server on shm name %q (python3 -m herd_env.serve --shm %s): %v", t.addr, t.addr, err)
	}
	w := &shmWire{c: c, timeout: t.timeout}
	w.msg.Batch = &w.batch
	w.resp.Msg = &w.msg
	return w, nil
}

// ioErr turns a socket error into the status a gRPC call would give.
func (w *shmWire) ioErr(err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "no answer within %v", w.timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, unix.ECONNRESET), errors.Is(err, unix.EPIPE):
		return status.Error(codes.Unavailable, "server closed the session")
	}
	return status.Error(codes.Unavailable, err.Error())
}

func (w *shmWire) send(req *herdv1.EnvRequest) error {
	if err := w.c.SetDeadline(time.Now().Add(w.timeout)); err != nil {
		return w.ioErr(err)
	}
	w.stepped = false
	if st := req.GetStep(); st != nil && w.mem != nil && len(st.Actions) == len(w.act) {
		copy(w.act, st.Actions)
		w.hdr[0] = shmStep
		if _, err := w.c.Write(w.hdr[:1]); err != nil {
			return w.ioErr(err)
		}
		w.stepped = true
		return nil
	}
	body, err := proto.Marshal(req)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	frame := make([]byte, 5+len(body))
	frame[0] = shmMsg
	binary.LittleEndian.PutUint32(frame[1:], uint32(len(body)))
	copy(frame[5:], body)
	if _, err := w.c.Write(frame); err != nil {
		return w.ioErr(err)
	}
	return nil
}

func (w *shmWire) recv() (*herdv1.EnvResponse, error) {
	if _, err := io.ReadFull(w.c, w.hdr[:1]); err != nil {
		return nil, w.ioErr(err)
	}
	switch w.hdr[0] {
	case shmStepped:
		if !w.stepped {
			return nil, status.Error(codes.Internal, "shm: step answer to a request that was no step")
		}
		return w.readStep()
	case shmMsg:
		if _, err := io.ReadFull(w.c, w.hdr[1:5]); err != nil {
			return nil, w.ioErr(err)
		}
		size := binary.LittleEndian.Uint32(w.hdr[1:5])
		if size > shmMaxFrame {
			return nil, status.Errorf(codes.Internal, "shm: message of %d bytes", size)
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(w.c, body); err != nil {
			return nil, w.ioErr(err)
		}
		resp := new(herdv1.EnvResponse)
		if err := proto.Unmarshal(body, resp); err != nil {
			return nil, status.Errorf(codes.Internal, "shm: bad message: %v", err)
		}
		if resp.GetError() != nil && resp.Msg == nil && resp.GetError().GetReason() == "" {
			// A session-ending error (bad open): the server closes the
			// socket after it, as a gRPC server ends the stream.
			return nil, status.Error(codes.Code(resp.GetError().GetCode()), resp.GetError().GetMessage())
		}
		return resp, nil
	}
	return nil, status.Errorf(codes.Internal, "shm: unknown answer byte %q", w.hdr[0])
}

// readStep copies the step's results out of the segment. Obs is a new
// slice every step (RemoteEnv hands it to its caller); the rest are reused.
func (w *shmWire) readStep() (*herdv1.EnvResponse, error) {
	b := &w.batch
	b.Obs = append([]float32(nil), w.obs...)
	b.Rewards = append(b.Rewards[:0], w.rew...)
	b.Terminated, b.Truncated, b.FinalObs = b.Terminated[:0], b.Truncated[:0], b.FinalObs[:0]
	for i := 0; i < w.n; i++ {
		term, trunc := w.term[i] != 0, w.trunc[i] != 0
		b.Terminated, b.Truncated = append(b.Terminated, term), append(b.Truncated, trunc)
		if term || trunc {
			b.FinalObs = append(b.FinalObs, w.final[i*w.od:(i+1)*w.od]...)
		}
	}
	return &w.resp, nil
}

// attach makes the segment, hands it to the server and maps the arrays.
// The segment is a memfd: it never has a name in /dev/shm, and the kernel
// frees it when the last of the two processes unmaps it or dies.
func (w *shmWire) attach(n, od, ad int) error {
	if n > shmMaxFrame || od > shmMaxFrame || ad > shmMaxFrame {
		return status.Errorf(codes.InvalidArgument, "shm: %d envs of obs dim %d, action dim %d is too large", n, od, ad)
	}
	l := newShmLayout(n, od, ad)
	fd, err := unix.MemfdCreate("herd-env", unix.MFD_CLOEXEC)
	if err != nil {
		return status.Errorf(codes.Unavailable, "shm: memfd_create: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(l.size)); err != nil {
		return status.Errorf(codes.Unavailable, "shm: size the segment: %v", err)
	}
	mem, err := unix.Mmap(fd, 0, l.size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return status.Errorf(codes.Unavailable, "shm: map the segment: %v", err)
	}
	w.mem, w.n, w.od, w.ad = mem, n, od, ad
	copy(mem, shmMagic)
	binary.LittleEndian.PutUint32(mem[8:], uint32(n))
	binary.LittleEndian.PutUint32(mem[12:], uint32(od))
	binary.LittleEndian.PutUint32(mem[16:], uint32(ad))
	w.act = f32s(mem, l.act, n*ad)
	w.obs = f32s(mem, l.obs, n*od)
	w.final = f32s(mem, l.final, n*od)
	w.rew = unsafe.Slice((*float64)(unsafe.Pointer(&mem[l.rew])), n)
	w.term, w.trunc = mem[l.term:l.term+n], mem[l.trunc:l.trunc+n]
	if err := w.c.SetDeadline(time.Now().Add(w.timeout)); err != nil {
		return w.ioErr(err)
	}
	// 'M', then the descriptor on a byte of its own, so that the server's
	// one-byte read of the request does not drop it.
	if _, err := w.c.Write([]byte{shmMap}); err != nil {
		return w.ioErr(err)
	}
	if _, _, err := w.c.WriteMsgUnix([]byte{'F'}, unix.UnixRights(fd), nil); err != nil {
		return w.ioErr(err)
	}
	resp, err := w.recvMapped()
	if err != nil {
		return err
	}
	if e := resp.GetError(); e != nil {
		return status.Error(codes.Code(e.GetCode()), "shm: "+e.GetMessage())
	}
	return nil
}

func (w *shmWire) recvMapped() (*herdv1.EnvResponse, error) {
	if _, err := io.ReadFull(w.c, w.hdr[:1]); err != nil {
		return nil, w.ioErr(err)
	}
	if w.hdr[0] == shmMapped {
		return &herdv1.EnvResponse{}, nil
	}
	if w.hdr[0] != shmMsg {
		return nil, status.Errorf(codes.Internal, "shm: unknown answer byte %q", w.hdr[0])
	}
	// An error message: read it through recv's framing.
	if _, err := io.ReadFull(w.c, w.hdr[1:5]); err != nil {
		return nil, w.ioErr(err)
	}
	size := binary.LittleEndian.Uint32(w.hdr[1:5])
	if size > shmMaxFrame {
		return nil, status.Errorf(codes.Internal, "shm: message of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(w.c, body); err != nil {
		return nil, w.ioErr(err)
	}
	resp := new(herdv1.EnvResponse)
	if err := proto.Unmarshal(body, resp); err != nil {
		return nil, status.Errorf(codes.Internal, "shm: bad message: %v", err)
	}
	return resp, nil
}

func f32s(mem []byte, off, n int) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&mem[off])), n)
}

func (w *shmWire) close() error {
	err := w.c.Close()
	if w.mem != nil {
		unix.Munmap(w.mem)
		w.mem, w.act, w.obs, w.final, w.rew, w.term, w.trunc = nil, nil, nil, nil, nil, nil, nil
	}
	return err
}
