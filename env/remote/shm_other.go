//go:build !linux

package remote

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	herdv1 "herd/proto/herd/v1"
)

// shm:// needs Linux (abstract Unix-domain sockets and memfd).
type shmWire struct{}

func dialShm(t remoteTarget) (*shmWire, error) {
	return nil, status.Error(codes.Unimplemented, "shm:// remote envs need Linux")
}

func (w *shmWire) send(*herdv1.EnvRequest) error               { return nil }
func (w *shmWire) recv() (*herdv1.EnvResponse, error)          { return nil, nil }
func (w *shmWire) attach(n, obsDim, actDim int, u8 bool) error { return nil }
func (w *shmWire) close() error                                { return nil }
