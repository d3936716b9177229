package remote

import (
	"errors"
	"herd/env"
	"net"
	"net/http"
	"strings"
	"testing"
)

// serveTCP accepts connections on 127.0.0.1 and hands each to handle.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go handle(c)
		}
	}()
	return l.Addr().String()
}

// A server that is not a gRPC env server gets a message that says what it
// is: an HTTP/1.1 server, a black hole that accepts and never answers, one
// that drops the connection at once; and a timeout says it timed out.
func TestRemoteOpenMessages(t *testing.T) {
	h1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h1.Close() })
	go http.Serve(h1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }))
	hole := serveTCP(t, func(c net.Conn) {}) // accepts, never answers
	closer := serveTCP(t, func(c net.Conn) { c.Close() })
	http10 := serveTCP(t, func(c net.Conn) { // as python3 -m http.server answers
		c.Read(make([]byte, 1024)) // the request (the client's preface)
		c.Write([]byte("HTTP/1.0 400 Bad request version\r\nContent-Type: text/html\r\n\r\n<html>bad</html>"))
		c.Close()
	})
	for _, c := range []struct {
		name, id      string
		want, notWant string
	}{
		{"http/1.1", "grpc://" + h1.Addr().String() + "/CartPole-v1?timeout=5s", "not in HTTP/2", "TLS"},
		{"http/1.0", "grpc://" + http10 + "/CartPole-v1?timeout=5s", "not in HTTP/2", "TLS"},
		{"black hole", "grpc://" + hole + "/CartPole-v1?timeout=500ms", "timed out: no answer within 500ms", "TLS"},
		{"timeout=1ns", "grpc://" + hole + "/CartPole-v1?timeout=1ns", "timed out: no answer within 1ns", "context canceled"},
		{"closes at once", "grpc://" + closer + "/CartPole-v1?timeout=5s", "closed the connection at once", "HTTP/2"},
	} {
		_, err := env.Maker{Remote: Opener{}}.MakeVector(c.id, 1, env.Sync)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.notWant) {
			t.Errorf("%s: %v; want %q and not %q", c.name, err, c.want, c.notWant)
		}
	}
	// gRPC's own connect deadline (20 s, before the default 30 s timeout)
	// ends a black hole's read of the server preface.
	err = openHint(remoteTarget{addr: hole}, errors.New(`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: raw-read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout"`))
	if msg := err.Error(); !strings.Contains(msg, "sent nothing") || strings.Contains(msg, "TLS") {
		t.Errorf("black hole at gRPC's connect deadline: %v", err)
	}
}
