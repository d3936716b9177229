package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// ProtocolVersion is the herd.v1 protocol version these packages speak
// (herdv1.ProtocolVersion_PROTOCOL_VERSION_1).
const ProtocolVersion = 1

// MaxMessageBytes is the default limit on one message in either direction.
const MaxMessageBytes = 64 << 20

// DefaultTimeout is the default deadline of one client call.
const DefaultTimeout = 30 * time.Second

// ErrConfig marks a bad address, TLS file or option.
var ErrConfig = errors.New("service: bad configuration")

// TLSFiles names PEM files. On a server, Cert and Key are its certificate
// and ClientCA (optional) the CA that client certificates must chain to. On
// a client, CA (optional: the system roots otherwise) verifies the server,
// and Cert and Key (optional) are the client's certificate for mTLS.
type TLSFiles struct {
	Cert, Key string
	CA        string
	// ServerName overrides the name checked in the server's certificate
	// (client side; default: the host dialled).
	ServerName string
}

// Enabled reports whether any file is named.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// ServerConfig loads a server's TLS configuration; nil when no file is
// named (plaintext).
func (f TLSFiles) ServerConfig() (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("%w: TLS needs both a certificate and a key (got cert %q, key %q)", ErrConfig, f.Cert, f.Key)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// ClientConfig loads a client's TLS configuration (never nil: a client that
// asks for TLS with no files verifies against the system roots).
func (f TLSFiles) ClientConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both cert and key (got cert %q, key %q)", ErrConfig, f.Cert, f.Key)
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: no PEM certificate in %s", ErrConfig, file)
	}
	return pool, nil
}

// Listen listens on addr, putting 127.0.0.1 where addr names no host
// (":7000" or "7000"), so a server is reachable from other machines only
// when its address says so ("0.0.0.0:7000").
func Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "", addr
	}
	if host == "" {
		host = "127.0.0.1"
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("%w: listen on %q: %w", ErrConfig, addr, err)
	}
	return lis, nil
}

// ServerOptions are the options every herd server uses: message limits of
// maxMsg bytes (MaxMessageBytes if ≤ 0), TLS when tlsConf is not nil, and
// a keepalive policy that lets clients ping every 10 s.
func ServerOptions(tlsConf *tls.Config, maxMsg int) []grpc.ServerOption {
	if maxMsg <= 0 {
		maxMsg = MaxMessageBytes
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMsg),
		grpc.MaxSendMsgSize(maxMsg),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
	if tlsConf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
	}
	return opts
}

// Dial makes a client connection to target (host:port; the connection is
// made lazily by the first call): TLS when tlsConf is not nil, message
// limits of maxMsg bytes (MaxMessageBytes if ≤ 0), and keepalive pings
// every 10 s that close a connection whose peer stopped answering.
func Dial(target string, tlsConf *tls.Config, maxMsg int) (*grpc.ClientConn, error) {
	if maxMsg <= 0 {
		maxMsg = MaxMessageBytes
	}
	creds := insecure.NewCredentials()
	if tlsConf != nil {
		creds = credentials.NewTLS(tlsConf)
	}
	conn, err := grpc.NewClient("passthrough:///"+target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %q: %w", ErrConfig, target, err)
	}
	return conn, nil
}

// Serve runs g on lis until ctx ends, then stops it gracefully, giving open
// calls (env sessions included) up to grace to finish before it closes them.
func Serve(ctx context.Context, g *grpc.Server, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		g.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
