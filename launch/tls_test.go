package launch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"herd/internal/testcert"
)

// A server that requires mutual TLS lets in a worker with the CA, a
// certificate and its key (--nats-tls-ca, --nats-tls-cert,
// --nats-tls-key), over which the run's JetStream buckets work, and
// refuses every other client with an error that names the cause.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcert.NewCA(t, "herd-test"), testcert.NewCA(t, "another")
	srvCert, srvKey := ca.Leaf("nats", true)
	certFile, keyFile := ca.Leaf("worker", false)
	strangerCertFile, strangerKeyFile := other.Leaf("stranger", false)
	caFile, otherCA := ca.File, other.File

	pair, err := tls.LoadX509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, TLS: true, TLSVerify: true, TLSTimeout: 2,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server did not start")
	}
	url := s.ClientURL() // tls:// on a server that requires TLS

	o := NATS{URL: url, TLSCA: caFile, TLSCert: certFile, TLSKey: keyFile}
	n, closeConn, err := o.jetstream("worker")
	if err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	ctx := context.Background()
	if err := n.PutRunConfig(ctx, "tls-run", []byte("algo: ppo\n")); err != nil {
		t.Errorf("JetStream over TLS: %v", err)
	} else if got, err := n.RunConfig(ctx, "tls-run"); err != nil || string(got) != "algo: ppo\n" {
		t.Errorf("JetStream over TLS: read back %q, %v", got, err)
	}
	closeConn()

	for _, c := range []struct {
		what string
		o    NATS
		want string
	}{
		{"another CA", NATS{URL: url, TLSCA: otherCA, TLSCert: certFile, TLSKey: keyFile}, "certificate"},
		{"no CA (the system's roots)", NATS{URL: url, TLSCert: certFile, TLSKey: keyFile}, "certificate"},
		{"no client certificate", NATS{URL: url, TLSCA: caFile}, "--nats-tls-cert"},
		{"a certificate from another CA", NATS{URL: url, TLSCA: caFile, TLSCert: strangerCertFile, TLSKey: strangerKeyFile}, "certificate"},
		{"a missing CA file", NATS{URL: url, TLSCA: filepath.Join(dir, "nope.pem")}, "nope.pem"},
	} {
		nc, err := c.o.dial("test")
		if err == nil {
			nc.Close()
			t.Errorf("%s: let in", c.what)
			continue
		}
		if !strings.Contains(err.Error(), "connect to NATS") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not name the cause (%q)", c.what, err, c.want)
		}
		t.Logf("%s: %v", c.what, err)
		if strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: error shows key material: %v", c.what, err)
		}
	}
}
