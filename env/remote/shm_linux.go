//go:build linux

package remote

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/internal/shmwire"
	herdv1 "herd/proto/herd/v1"
)

// shmWire is one session over a Unix-domain socket with its batches in a
// shared memory segment (internal/shmwire has the protocol). Once the
// server takes the wake pipes (shmwire.FlagPipes), rd and wr carry the
// session's bytes instead of c.
type shmWire struct {
	c       *net.UnixConn
	rd, wr  *os.File // the answer pipe's read end, the request pipe's write end; nil on the socket
	timeout time.Duration
	mem     []byte
	l       shmwire.Layout
	v       shmwire.Views
	stepped bool   // the last send was a step through the segment
	seq     uint32 // steps sent through the segment (the header's ReqSeq)
	misses  int    // spins in a row that ended without the answer
	spinFor time.Duration
	resp    herdv1.EnvResponse
	msg     herdv1.EnvResponse_Batch
	batch   herdv1.Batch
	tag     [1]byte
}

func dialShm(t remoteTarget) (*shmWire, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: shmwire.SocketName(t.addr), Net: "unix"})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "no herd env server on shm name %q (herd_env.serve --shm %s): %v", t.addr, t.addr, err)
	}
	w := &shmWire{c: c, timeout: t.timeout, spinFor: t.spin}
	if w.spinFor < 0 {
		w.spinFor = shmwire.SpinFor
	}
	w.msg.Batch = &w.batch
	w.resp.Msg = &w.msg
	return w, nil
}

// setDeadline bounds the next send and recv by the call's timeout.
func (w *shmWire) setDeadline() error {
	t := time.Now().Add(w.timeout)
	if w.rd == nil {
		return w.c.SetDeadline(t)
	}
	if err := w.rd.SetReadDeadline(t); err != nil {
		return err
	}
	return w.wr.SetWriteDeadline(t)
}

// in and out are where the session's bytes travel now.
func (w *shmWire) in() io.Reader {
	if w.rd == nil {
		return w.c
	}
	return w.rd
}

func (w *shmWire) out() io.Writer {
	if w.wr == nil {
		return w.c
	}
	return w.wr
}

// ioErr turns a socket error into the status a gRPC call would give.
func (w *shmWire) ioErr(err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "timed out: no answer within %v (the env id's timeout)", w.timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, unix.ECONNRESET), errors.Is(err, unix.EPIPE):
		return status.Error(codes.Unavailable, "server closed the session")
	case errors.Is(err, shmwire.ErrFrame):
		return status.Error(codes.Internal, err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}

func (w *shmWire) send(req *herdv1.EnvRequest) error {
	if err := w.setDeadline(); err != nil {
		return w.ioErr(err)
	}
	w.stepped = false
	if st := req.GetStep(); st != nil && w.mem != nil && len(st.Actions) == len(w.v.Act) {
		copy(w.v.Act, st.Actions)
		w.seq++
		atomic.StoreUint32(shmwire.Seq(w.mem, shmwire.ReqSeq), w.seq)
		w.tag[0] = shmwire.Step
		if _, err := w.out().Write(w.tag[:]); err != nil {
			return w.ioErr(err)
		}
		w.stepped = true
		return nil
	}
	if err := shmwire.WriteMsg(w.out(), req); err != nil {
		return w.ioErr(err)
	}
	return nil
}

func (w *shmWire) recv() (*herdv1.EnvResponse, error) {
	if w.stepped {
		w.spin()
	}
	if _, err := io.ReadFull(w.in(), w.tag[:]); err != nil {
		return nil, w.ioErr(err)
	}
	switch w.tag[0] {
	case shmwire.Stepped:
		if !w.stepped {
			return nil, status.Error(codes.Internal, "shm: step answer to a request that was no step")
		}
		return w.readStep()
	case shmwire.Msg:
		return w.readMsg()
	}
	return nil, status.Errorf(codes.Internal, "shm: unknown answer byte %q", w.tag[0])
}

// spin watches the server's step counter for at most w.spinFor: a
// fast env's answer then finds this thread running, and the read below
// returns at once instead of sleeping and being woken. The pipe (or
// socket) byte still decides; the spin only saves a wake-up. After shmwire.SpinMisses
// spins in a row without the answer (a slow env, or a server that does not
// count), it spins only on every shmwire.SpinProbe-th step until one
// catches the answer again.
func (w *shmWire) spin() {
	if w.spinFor == 0 || (w.misses >= shmwire.SpinMisses && w.seq%shmwire.SpinProbe != 0) {
		return
	}
	resp := shmwire.Seq(w.mem, shmwire.RespSeq)
	for start := time.Now(); ; {
		if atomic.LoadUint32(resp) == w.seq {
			w.misses = 0
			return
		}
		if time.Since(start) >= w.spinFor {
			w.misses++
			return
		}
	}
}

func (w *shmWire) readMsg() (*herdv1.EnvResponse, error) {
	resp := new(herdv1.EnvResponse)
	if err := shmwire.ReadFrame(w.in(), resp); err != nil {
		return nil, w.ioErr(err)
	}
	if e := resp.GetError(); e != nil && resp.Msg == nil && e.GetReason() == "" {
		// An error that ends the session (a bad open): the server closes
		// the socket after it, as a gRPC server ends the stream.
		return nil, status.Error(codes.Code(e.GetCode()), e.GetMessage())
	}
	return resp, nil
}

// readStep copies the step's results out of the segment. Obs is a new
// slice every step (Env hands it to its caller); the rest are reused. A
// uint8 segment's observations go out as bytes (Batch.obs_u8), which the
// session turns into floats as it does gRPC's.
func (w *shmWire) readStep() (*herdv1.EnvResponse, error) {
	b, v, od := &w.batch, &w.v, w.l.ObsDim
	u8 := w.l.ObsBytes == 1
	if u8 {
		b.Obs, b.ObsU8 = nil, append(b.ObsU8[:0], v.ObsU8...)
	} else {
		b.Obs, b.ObsU8 = append([]float32(nil), v.Obs...), nil
	}
	b.Rewards = append(b.Rewards[:0], v.Rew...)
	b.Terminated, b.Truncated, b.FinalObs, b.FinalObsU8 = b.Terminated[:0], b.Truncated[:0], b.FinalObs[:0], b.FinalObsU8[:0]
	b.Lives = b.Lives[:0]
	for i := 0; i < w.l.N; i++ {
		term, trunc := v.Term[i] != 0, v.Trunc[i] != 0
		b.Terminated, b.Truncated = append(b.Terminated, term), append(b.Truncated, trunc)
		if term || trunc {
			if u8 {
				b.FinalObsU8 = append(b.FinalObsU8, v.FinalU8[i*od:(i+1)*od]...)
			} else {
				b.FinalObs = append(b.FinalObs, v.Final[i*od:(i+1)*od]...)
			}
		}
		if v.Lives[i] != shmwire.NoLives {
			b.Lives = append(b.Lives, v.Lives[i])
		}
	}
	if len(b.Lives) != 0 && len(b.Lives) != w.l.N {
		return nil, status.Errorf(codes.Internal, "shm: the segment holds lives of %d of its %d envs", len(b.Lives), w.l.N)
	}
	return &w.resp, nil
}

// attach makes the segment, hands it to the server and maps the arrays.
// The segment is a memfd: it never has a name in /dev/shm, and the kernel
// frees it when the last of the two processes unmaps it or dies.
func (w *shmWire) attach(n, od, ad int, u8 bool) error {
	if n > shmwire.MaxDim || od > shmwire.MaxDim || ad > shmwire.MaxDim {
		return status.Errorf(codes.InvalidArgument, "shm: %d envs of obs dim %d, action dim %d is too large", n, od, ad)
	}
	l := shmwire.NewLayout(n, od, ad, u8)
	fd, err := unix.MemfdCreate("herd-env", unix.MFD_CLOEXEC)
	if err != nil {
		return status.Errorf(codes.Unavailable, "shm: memfd_create: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(l.Size)); err != nil {
		return status.Errorf(codes.Unavailable, "shm: size the segment: %v", err)
	}
	mem, err := unix.Mmap(fd, 0, l.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return status.Errorf(codes.Unavailable, "shm: map the segment: %v", err)
	}
	w.mem, w.l = mem, l
	l.WriteHeader(mem)
	binary.LittleEndian.PutUint32(mem[shmwire.Flags:], shmwire.FlagPipes)
	w.v = l.Views(mem)
	if err := w.c.SetDeadline(time.Now().Add(w.timeout)); err != nil {
		return w.ioErr(err)
	}
	// Map, then the descriptor on a byte of its own, so that the server's
	// one-byte read of the request does not drop it.
	if _, err := w.c.Write([]byte{shmwire.Map}); err != nil {
		return w.ioErr(err)
	}
	if _, _, err := w.c.WriteMsgUnix([]byte{shmwire.FD}, unix.UnixRights(fd), nil); err != nil {
		return w.ioErr(err)
	}
	if _, err := io.ReadFull(w.c, w.tag[:]); err != nil {
		return w.ioErr(err)
	}
	switch w.tag[0] {
	case shmwire.Mapped:
		return nil // a server without wake pipes: the socket stays
	case shmwire.WantPipes:
		return w.attachPipes()
	case shmwire.Msg:
		resp, err := w.readMsg()
		if err != nil {
			return layoutHint(err)
		}
		return status.Errorf(codes.Internal, "shm: server refused the segment: %v", resp.GetError().GetMessage())
	}
	return status.Errorf(codes.Internal, "shm: unknown answer byte %q", w.tag[0])
}

// layoutHint adds to a server's refusal of the segment as a header
// mismatch, all that a server of the previous layout (HERDSHM1) can say,
// that it may be older than this client.
func layoutHint(err error) error {
	st := status.Convert(err)
	if !strings.Contains(st.Message(), "header does not match") {
		return err
	}
	return status.Errorf(st.Code(), "%s (this client's segment layout is %s: the server may be an older herd_env or herd, which must be updated)", st.Message(), shmwire.Magic)
}

// attachPipes makes the two wake pipes, hands the server its ends (the
// request pipe's read end, the answer pipe's write end) and closes this
// process's copies of them, so that each write end has one holder: when
// the server dies, the answer pipe's read ends with EOF at once, as the
// socket's did. It then waits for Mapped on the answer pipe.
func (w *shmWire) attachPipes() error {
	var req, ans [2]int
	if err := unix.Pipe2(req[:], unix.O_CLOEXEC); err != nil {
		return status.Errorf(codes.Unavailable, "shm: pipe: %v", err)
	}
	if err := unix.Pipe2(ans[:], unix.O_CLOEXEC); err != nil {
		unix.Close(req[0])
		unix.Close(req[1])
		return status.Errorf(codes.Unavailable, "shm: pipe: %v", err)
	}
	_, _, err := w.c.WriteMsgUnix([]byte{shmwire.FD}, unix.UnixRights(req[0], ans[1]), nil)
	unix.Close(req[0])
	unix.Close(ans[1])
	// Non-blocking, so that os.File reads and writes go through Go's
	// poller and obey deadlines (the server's ends, separate open files,
	// stay blocking).
	for _, fd := range []int{req[1], ans[0]} {
		if err2 := unix.SetNonblock(fd, true); err2 != nil && err == nil {
			err = err2
		}
	}
	w.rd, w.wr = os.NewFile(uintptr(ans[0]), "herd-shm-answers"), os.NewFile(uintptr(req[1]), "herd-shm-requests")
	if err != nil {
		return w.ioErr(err)
	}
	if err := w.setDeadline(); err != nil {
		return w.ioErr(err)
	}
	if _, err := io.ReadFull(w.rd, w.tag[:]); err != nil {
		return w.ioErr(err)
	}
	switch w.tag[0] {
	case shmwire.Mapped:
		return nil
	case shmwire.Msg:
		resp, err := w.readMsg()
		if err != nil {
			return err
		}
		return status.Errorf(codes.Internal, "shm: server refused the pipes: %v", resp.GetError().GetMessage())
	}
	return status.Errorf(codes.Internal, "shm: unknown answer byte %q", w.tag[0])
}

func (w *shmWire) close() error {
	if w.rd != nil {
		w.rd.Close()
		w.wr.Close()
		w.rd, w.wr = nil, nil
	}
	err := w.c.Close()
	if w.mem != nil {
		unix.Munmap(w.mem)
		w.mem, w.v = nil, shmwire.Views{}
	}
	return err
}
