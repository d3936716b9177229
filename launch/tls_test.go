package launch

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate (for 127.0.0.1) and its key, both PEM.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A server that requires mutual TLS lets in a worker with the CA, a
// certificate and its key (--nats-tls-ca, --nats-tls-cert,
// --nats-tls-key), over which the run's JetStream buckets work, and
// refuses every other client with an error that names the cause.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "herd-test-ca"), newTestCA(t, "another-ca")
	srvCert, srvKey := ca.issue(t, "nats", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := ca.issue(t, "worker", x509.ExtKeyUsageClientAuth)
	strangerCert, strangerKey := other.issue(t, "stranger", x509.ExtKeyUsageClientAuth)
	caFile, otherCA := writeFile(t, dir, "ca.pem", ca.pem), writeFile(t, dir, "other-ca.pem", other.pem)
	certFile, keyFile := writeFile(t, dir, "cert.pem", cliCert), writeFile(t, dir, "key.pem", cliKey)
	strangerCertFile, strangerKeyFile := writeFile(t, dir, "s-cert.pem", strangerCert), writeFile(t, dir, "s-key.pem", strangerKey)

	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
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
		{"no client certificate", NATS{URL: url, TLSCA: caFile}, "certificate required"},
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
