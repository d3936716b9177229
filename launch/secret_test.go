package launch

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"herd/transport"
)

// A malformed URL's error (url.Parse quotes it) does not repeat the
// password or the user information.
func TestDialErrorHidesPassword(t *testing.T) {
	for _, u := range []string{"nats://herd:s3cr3tpw@127.0.0.1:notaport", "nats://herd:s3cr3tpw@127.0.0.1:1,nats://x:y@%zz"} {
		o := NATS{URL: u}
		_, err := o.dial("test")
		if err == nil {
			t.Fatalf("%s: dial succeeded", u)
		}
		if strings.Contains(err.Error(), "s3cr3tpw") {
			t.Errorf("error repeats the password: %v", err)
		}
	}
}

// The embedded server's credentials: fresh each time, and a client
// without them is refused.
func TestEmbeddedServerNeedsCredentials(t *testing.T) {
	var urls []string
	for range 2 {
		srv, err := transport.StartServer(transport.ServerOptions{Generate: true})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
		if nc, err := nats.Connect(srv.URL()); err == nil {
			nc.Close()
			t.Fatal("a client without credentials was let in")
		}
		o := NATS{URL: srv.AuthURL()}
		nc, err := o.dial("test")
		if err != nil {
			t.Fatalf("with credentials: %v", err)
		}
		nc.Close()
		if got := RedactURL(o.URL); strings.Contains(got, "herd-") || !strings.Contains(got, "@127") {
			t.Errorf("RedactURL(%q) = %q", o.URL, got)
		}
		urls = append(urls, strings.Split(o.URL, "@")[0])
	}
	if urls[0] == urls[1] || len(urls[0]) < 60 {
		t.Errorf("credentials not fresh or short: %q %q", urls[0], urls[1])
	}
}
