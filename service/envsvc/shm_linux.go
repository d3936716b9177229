//go:build linux

package envsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	if name == "" {
		return nil, errors.New("envsvc: empty shm name")
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
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[*net.UnixConn]bool{}
	)
	closeAll := func() {
		lis.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
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
			s.shmSession(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
}

// ending is an error that ends a shm session (a Status without reason).
func ending(err error) *herdv1.EnvResponse {
	st, _ := status.FromError(err)
	return &herdv1.EnvResponse{Error: &herdv1.Status{Code: int32(st.Code()), Message: st.Message()}}
}

// shmSession runs one client's session until it closes the socket, dies
// or sends something malformed (answered with an ending error).
func (s *Server) shmSession(c *net.UnixConn) {
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
			l = shmwire.NewLayout(len(sess.envs), sess.obs.Dim(), sess.act.Dim())
			if mem, err = recvSegment(c, l); err != nil {
				end(err)
				return
			}
			v = l.Views(mem)
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
func (s *Server) shmParallel(c *net.UnixConn, first *herdv1.EnvRequest, end func(error)) {
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
		if (b.Terminated[i] || b.Truncated[i]) && len(b.FinalObs) >= (k+1)*od {
			copy(v.Final[i*od:(i+1)*od], b.FinalObs[k*od:(k+1)*od])
			k++
		}
	}
}

// recvSegment reads the FD byte with the segment's descriptor and maps it.
func recvSegment(c *net.UnixConn, l shmwire.Layout) ([]byte, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "segment: %v", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if n != 1 || buf[0] != shmwire.FD || len(fds) != 1 {
		return nil, status.Error(codes.InvalidArgument, "segment: want one descriptor on an F byte")
	}
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
