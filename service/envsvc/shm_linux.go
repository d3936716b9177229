//go:build linux

package envsvc

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/internal/shmwire"
	herdv1 "herd/proto/herd/v1"
)

// ListenShm listens on the shared-memory transport's socket for name
// (clients use env ids shm://NAME/ID); a name in use is an error.
func ListenShm(name string) (*net.UnixListener, error) {
	if err := shmwire.CheckName(name); err != nil {
		return nil, fmt.Errorf("envsvc: %w", err)
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: shmwire.SocketName(name), Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("envsvc: shm name %q: %w", name, err)
	}
	return lis, nil
}

// ServeShm serves sessions over the same-host shared-memory transport
// (internal/shmwire) on lis until ctx ends, then closes lis and every
// session and returns nil once they have ended. Sessions count against the
// same MaxSessions as gRPC ones; each runs in its own goroutine.
func (s *Server) ServeShm(ctx context.Context, lis *net.UnixListener) error {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[io.Closer]bool{} // sockets and wake pipes of live sessions
		closed bool
	)
	closeAll := func() {
		lis.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
	// track registers what a session reads from (its socket, then its
	// pipes), so that stopping closes it and so ends the session.
	track := func(c io.Closer) {
		mu.Lock()
		if closed {
			c.Close()
		} else {
			conns[c] = true
		}
		mu.Unlock()
	}
	stop := context.AfterFunc(ctx, closeAll)
	defer stop()
	for {
		c, err := lis.AcceptUnix()
		if err != nil {
			closeAll()
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("envsvc: shm: %w", err)
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			c.Close()
			continue
		}
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sio := &shmIO{c: c, track: track}
			s.shmSession(sio)
			mu.Lock()
			delete(conns, c)
			if sio.rd != nil {
				delete(conns, sio.rd)
				delete(conns, sio.wr)
			}
			mu.Unlock()
			sio.close()
		}()
	}
}

// shmIO is a session's byte stream: its socket, then, once the client
// hands over wake pipes (shmwire.FlagPipes), the request pipe's read end
// and the answer pipe's write end.
type shmIO struct {
	c      *net.UnixConn
	rd, wr *os.File
	track  func(io.Closer)
}

func (s *shmIO) Read(p []byte) (int, error) {
	if s.rd != nil {
		return s.rd.Read(p)
	}
	return s.c.Read(p)
}

func (s *shmIO) Write(p []byte) (int, error) {
	if s.wr != nil {
		return s.wr.Write(p)
	}
	return s.c.Write(p)
}

// takePipes receives the two pipe ends sent with an FD byte.
func (s *shmIO) takePipes() error {
	fds, err := recvFDs(s.c, "pipes", 2)
	if err != nil {
		return err
	}
	// Non-blocking, so that the files go through Go's poller and closing
	// them (when the server stops) ends a blocked read. This process holds
	// the only copy of each end, so the flag touches no one else.
	for _, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
			return status.Errorf(codes.Unavailable, "pipes: %v", err)
		}
	}
	s.rd, s.wr = os.NewFile(uintptr(fds[0]), "herd-shm-requests"), os.NewFile(uintptr(fds[1]), "herd-shm-answers")
	s.track(s.rd)
	s.track(s.wr)
	return nil
}

func (s *shmIO) close() {
	if s.rd != nil {
		s.rd.Close()
		s.wr.Close()
	}
	s.c.Close()
}

// ending is an error that ends a shm session (a Status without reason).
func ending(err error) *herdv1.EnvResponse {
	st, _ := status.FromError(err)
	return &herdv1.EnvResponse{Error: &herdv1.Status{Code: int32(st.Code()), Message: st.Message()}}
}

// shmSession runs one client's session until it closes the socket, dies
// or sends something malformed (answered with an ending error).
func (s *Server) shmSession(c *shmIO) {
	end := func(err error) { shmwire.WriteMsg(c, ending(err)) }
	select {
	case s.sessions <- struct{}{}:
		defer func() { <-s.sessions }()
	default:
		s.metrics.refuse()
		end(status.Errorf(codes.ResourceExhausted, "server has %d live sessions, its limit", cap(s.sessions)))
		return
	}
	var tag [1]byte
	if _, err := io.ReadFull(c, tag[:]); err != nil {
		return
	}
	if tag[0] != shmwire.Msg {
		end(status.Error(codes.InvalidArgument, "the first message of a session must be open"))
		return
	}
	first := new(herdv1.EnvRequest)
	if err := shmwire.ReadFrame(c, first); err != nil {
		end(status.Errorf(codes.InvalidArgument, "bad request: %v", err))
		return
	}
	if first.GetOpen().GetParallel() {
		s.shmParallel(c, first, end)
		return
	}
	sess, err := s.open(first)
	if err != nil {
		end(err)
		return
	}
	defer sess.close()
	resp, err := sess.openResponse()
	if err != nil {
		end(err)
		return
	}
	if shmwire.WriteMsg(c, resp) != nil {
		return
	}
	var (
		mem  []byte
		l    shmwire.Layout
		v    shmwire.Views
		acts []float32
	)
	defer func() {
		if mem != nil {
			unix.Munmap(mem)
		}
	}()
	for {
		if _, err := io.ReadFull(c, tag[:]); err != nil {
			return // the client closed the session or died
		}
		switch tag[0] {
		case shmwire.Step:
			if mem == nil {
				end(status.Error(codes.FailedPrecondition, "step through shm before the segment"))
				return
			}
			acts = append(acts[:0], v.Act...) // the env never sees memory the client can write
			resp := sess.step(acts)
			if resp.GetError() != nil {
				if shmwire.WriteMsg(c, resp) != nil {
					return
				}
				continue
			}
			writeStep(l, v, resp.GetBatch())
			atomic.StoreUint32(shmwire.Seq(mem, shmwire.RespSeq), atomic.LoadUint32(shmwire.Seq(mem, shmwire.ReqSeq)))
			if _, err := c.Write([]byte{shmwire.Stepped}); err != nil {
				return
			}
		case shmwire.Map:
			if mem != nil {
				end(status.Error(codes.InvalidArgument, "segment sent twice"))
				return
			}
			// herd's Go envs are float32: this server never answers obs_u8.
			l = shmwire.NewLayout(len(sess.envs), sess.obs.Dim(), sess.act.Dim(), false)
			if mem, err = recvSegment(c.c, l); err != nil {
				end(err)
				return
			}
			v = l.Views(mem)
			if binary.LittleEndian.Uint32(mem[shmwire.Flags:])&shmwire.FlagPipes != 0 {
				if _, err := c.Write([]byte{shmwire.WantPipes}); err != nil {
					return
				}
				if err := c.takePipes(); err != nil {
					end(err)
					return
				}
			}
			if _, err := c.Write([]byte{shmwire.Mapped}); err != nil {
				return
			}
		case shmwire.Msg:
			req := new(herdv1.EnvRequest)
			if err := shmwire.ReadFrame(c, req); err != nil {
				end(status.Errorf(codes.InvalidArgument, "bad request: %v", err))
				return
			}
			resp, err := sess.handle(req)
			if err != nil {
				end(err)
				return
			}
			if shmwire.WriteMsg(c, resp) != nil {
				return
			}
		default:
			end(status.Errorf(codes.InvalidArgument, "unknown request byte %q", tag[0]))
			return
		}
	}
}

// shmParallel runs a multi-agent session over the shm socket: the
// gRPC session's messages (per-agent maps, every env in one message),
// framed on the socket. There is no segment: the per-agent batches change
// shape as agents leave, and one message already carries every env.
func (s *Server) shmParallel(c *shmIO, first *herdv1.EnvRequest, end func(error)) {
	sess, err := s.openParallel(first)
	if err != nil {
		end(err)
		return
	}
	defer sess.close()
	resp, err := sess.openResponse()
	if err != nil {
		end(err)
		return
	}
	if shmwire.WriteMsg(c, resp) != nil {
		return
	}
	var tag [1]byte
	for {
		if _, err := io.ReadFull(c, tag[:]); err != nil {
			return // the client closed the session or died
		}
		if tag[0] != shmwire.Msg {
			end(status.Errorf(codes.InvalidArgument, "request byte %q: a multi-agent session sends framed messages only", tag[0]))
			return
		}
		req := new(herdv1.EnvRequest)
		if err := shmwire.ReadFrame(c, req); err != nil {
			end(status.Errorf(codes.InvalidArgument, "bad request: %v", err))
			return
		}
		resp, err := sess.handle(req)
		if err != nil {
			end(err)
			return
		}
		if shmwire.WriteMsg(c, resp) != nil {
			return
		}
	}
}

// writeStep puts a step's results into the segment.
func writeStep(l shmwire.Layout, v shmwire.Views, b *herdv1.Batch) {
	od := l.ObsDim
	copy(v.Obs, b.Obs)
	copy(v.Rew, b.Rewards)
	k := 0
	for i := 0; i < l.N; i++ {
		v.Term[i], v.Trunc[i] = 0, 0
		if b.Terminated[i] {
			v.Term[i] = 1
		}
		if b.Truncated[i] {
			v.Trunc[i] = 1
		}
		v.Lives[i] = shmwire.NoLives
		if len(b.Lives) == l.N {
			v.Lives[i] = b.Lives[i]
		}
		if (b.Terminated[i] || b.Truncated[i]) && len(b.FinalObs) >= (k+1)*od {
			copy(v.Final[i*od:(i+1)*od], b.FinalObs[k*od:(k+1)*od])
			k++
		}
	}
}

// recvFDs reads an FD byte with k descriptors (what names them in errors).
func recvFDs(c *net.UnixConn, what string, k int) ([]int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "%s: %v", what, err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if n != 1 || buf[0] != shmwire.FD || len(fds) != k {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, status.Errorf(codes.InvalidArgument, "%s: want %d descriptors on an F byte", what, k)
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd) // a process an env starts must not hold a pipe end
	}
	return fds, nil
}

// recvSegment reads the FD byte with the segment's descriptor and maps it.
func recvSegment(c *net.UnixConn, l shmwire.Layout) ([]byte, error) {
	fds, err := recvFDs(c, "segment", 1)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fds[0])
	var st unix.Stat_t
	if err := unix.Fstat(fds[0], &st); err != nil || st.Size < int64(l.Size) {
		return nil, status.Errorf(codes.InvalidArgument, "segment of %d bytes, %d envs need %d", st.Size, l.N, l.Size)
	}
	mem, err := unix.Mmap(fds[0], 0, l.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "segment: mmap: %v", err)
	}
	if err := l.CheckHeader(mem); err != nil {
		unix.Munmap(mem)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return mem, nil
}
