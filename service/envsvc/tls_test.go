package envsvc

import (
	"net/url"
	"strings"
	"testing"

	"herd/internal/pyproc"
	"herd/internal/testcert"
	"herd/service"
)

// tlsCases checks, against a server at addr that requires client
// certificates signed by ca, that a client with such a certificate is
// served and that one without a certificate, one with a certificate from
// another CA, or one speaking plaintext is refused.
func tlsCases(t *testing.T, addr, id string, ca, rogue *testcert.CA) {
	t.Helper()
	cert, key := ca.Leaf("client", false)
	rcert, rkey := rogue.Leaf("intruder", false)
	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return "grpcs://" + addr + "/" + id + "?timeout=5s&" + v.Encode()
	}
	e, err := envs().Make(q("ca", ca.File, "cert", cert, "key", key))
	if err != nil {
		t.Fatalf("client with a valid certificate: %v", err)
	}
	if _, _, err := e.Reset(1); err != nil {
		t.Fatalf("client with a valid certificate: %v", err)
	}
	e.Close()
	for name, id := range map[string]string{
		"no client certificate":       q("ca", ca.File),
		"certificate from another CA": q("ca", ca.File, "cert", rcert, "key", rkey),
		"server not trusted":          q("ca", rogue.File, "cert", cert, "key", key),
		"plaintext client":            "grpc://" + addr + "/" + id + "?timeout=5s",
	} {
		e, err := envs().Make(id)
		if err == nil {
			_, _, err = e.Reset(1)
			e.Close()
		}
		if err == nil {
			t.Errorf("%s: served, want refused", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		// A refused certificate shows only as a dropped connection; the
		// error must still say what most likely happened.
		if (name == "no client certificate" || name == "certificate from another CA") && !strings.Contains(err.Error(), "refused this client's certificate") {
			t.Errorf("%s: the error does not say the certificate was refused: %v", name, err)
		}
	}
}

// TestMutualTLS: herd's server with --tls-cert/--tls-key/--tls-client-ca.
func TestMutualTLS(t *testing.T) {
	ca, rogue := testcert.NewCA(t, "herd-test"), testcert.NewCA(t, "rogue")
	cert, key := ca.Leaf("server", true)
	conf, err := service.TLSFiles{Cert: cert, Key: key, CA: ca.File}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, conf, 0)
	tlsCases(t, addr, "CartPole-v1", ca, rogue)
}

// TestPythonMutualTLS: the same against `python3 -m herd_env.serve` with
// the same flags.
func TestPythonMutualTLS(t *testing.T) {
	ca, rogue := testcert.NewCA(t, "herd-test"), testcert.NewCA(t, "rogue")
	cert, key := ca.Leaf("server", true)
	p := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole", "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca.File)
	tlsCases(t, p.Addr(), "CartPole", ca, rogue)
}
