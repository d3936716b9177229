package transport

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerOptions configure an embedded NATS server.
type ServerOptions struct {
	// Host is the listen address (default 127.0.0.1: loopback only).
	Host string
	// Port is the client port (default: a free port chosen by the OS).
	Port int
	// StoreDir is JetStream's directory (default: a new temporary
	// directory, removed by Shutdown).
	StoreDir string
	// MaxPayload is the largest message in bytes (default 8 MiB; samples
	// and inference batches must fit, weights are chunked).
	MaxPayload int32
	// User and Password, when set, are the one account clients must log
	// in with.
	User, Password string
	// Generate, when User is empty, sets User and Password from
	// crypto/rand (a secret must not follow from the run seed); AuthURL
	// returns the URL that carries them.
	Generate bool
}

// Server is an embedded NATS server with JetStream, run inside this
// process: what `herd launch` starts by default, and what the tests use.
type Server struct {
	s              *server.Server
	tempDir        string
	user, password string
}

// StartServer starts an embedded server and waits until it accepts
// clients.
func StartServer(o ServerOptions) (*Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = 8 << 20
	}
	if o.Generate && o.User == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("dist: nats credentials: %w", err)
		}
		o.User, o.Password = "herd-"+hex.EncodeToString(b[:4]), hex.EncodeToString(b[4:])
	}
	var tmp string
	if o.StoreDir == "" {
		d, err := os.MkdirTemp("", "herd-nats-")
		if err != nil {
			return nil, fmt.Errorf("dist: server store: %w", err)
		}
		tmp, o.StoreDir = d, d
	}
	s, err := server.NewServer(&server.Options{
		Host: o.Host, Port: o.Port, JetStream: true, StoreDir: o.StoreDir,
		MaxPayload: o.MaxPayload, NoSigs: true, NoLog: true,
		Username: o.User, Password: o.Password,
	})
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("dist: nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("dist: nats server on %s:%d did not start within 10 s", o.Host, o.Port)
	}
	return &Server{s: s, tempDir: tmp, user: o.User, password: o.Password}, nil
}

// URL is the client URL (nats://host:port).
func (s *Server) URL() string { return s.s.ClientURL() }

// AuthURL is URL with the server's user and password in it: a secret,
// for a client's environment, never its command line or a log.
func (s *Server) AuthURL() string {
	u := s.URL()
	if s.user == "" {
		return u
	}
	scheme, rest, _ := strings.Cut(u, "://")
	return scheme + "://" + s.user + ":" + s.password + "@" + rest
}

// Shutdown stops the server, waits for it and removes a temporary store.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
	if s.tempDir != "" {
		_ = os.RemoveAll(s.tempDir)
	}
}
