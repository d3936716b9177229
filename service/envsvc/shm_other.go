//go:build !linux

package envsvc

import (
	"context"
	"errors"
	"net"
)

// ListenShm: the shared-memory transport needs Linux.
func ListenShm(name string) (*net.UnixListener, error) {
	return nil, errors.New("envsvc: the shm transport needs Linux")
}

// ServeShm: the shared-memory transport needs Linux.
func (s *Server) ServeShm(ctx context.Context, lis *net.UnixListener) error {
	return errors.New("envsvc: the shm transport needs Linux")
}
