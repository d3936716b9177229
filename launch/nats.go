package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"herd/internal/redact"
	"herd/transport"
)

// URLEnv names the environment variable that holds the NATS URL(s) when
// NATS.URL is not given; it may carry credentials, as a command line
// should not (every user of the machine can read it).
const URLEnv = "HERD_NATS_URL"

// NATS are the connection options of a launcher and its workers. Secrets
// come from files or the environment, never from the command line or the
// logs: a URL with a user and password can be given as $HERD_NATS_URL,
// the launcher hands it to its workers that way, and it is only ever
// printed with its user information replaced (RedactURL).
type NATS struct {
	// URL is the server URL, or several comma-separated for a cluster.
	URL string
	// Creds is a credentials file (JWT + NKey seed).
	Creds string
	// TLSCA verifies the server; TLSCert and TLSKey are the client's
	// certificate and key for mutual TLS.
	TLSCA, TLSCert, TLSKey string
	// Replicas of the run's JetStream buckets (transport.NATS.SetReplicas);
	// 0: the server's default.
	Replicas int

	// errs reports the asynchronous errors of every connection dialled
	// through these options, once a minute for each message.
	errs *asyncErrors
}

// FromEnv takes the URL from $HERD_NATS_URL when URL is empty.
func (o *NATS) FromEnv() {
	if o.URL == "" {
		o.URL = os.Getenv(URLEnv)
	}
}

// args returns the flags that hand o (but its URL) on to a worker process.
func (o *NATS) args() []string {
	var a []string
	for _, kv := range [][2]string{{"--nats-creds", o.Creds}, {"--nats-tls-ca", o.TLSCA}, {"--nats-tls-cert", o.TLSCert}, {"--nats-tls-key", o.TLSKey}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	if o.Replicas != 0 {
		a = append(a, "--nats-replicas", strconv.Itoa(o.Replicas))
	}
	return a
}

// dial connects to the servers in o.URL under the connection name name.
func (o *NATS) dial(name string) (*nats.Conn, error) {
	// Pings every 5 s, 3 unanswered: a connection cut without a reset (a
	// network partition) is noticed within about 20 s and reconnected,
	// instead of after nats.go's default of 2 × 2 minutes.
	if o.errs == nil {
		o.errs = newAsyncErrors(os.Stderr)
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(5 * time.Second), nats.MaxPingsOutstanding(3), nats.ErrorHandler(o.errs.handle)}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		// The URL may carry a user and password, and a malformed one is
		// quoted by url.Parse's error: do not repeat it.
		return nil, fmt.Errorf("connect to NATS %s: %w%s", RedactURL(o.URL), redact.URLError(err, o.URL), o.tlsHint(err))
	}
	return nc, nil
}

// tlsHint names the likely cause of a connection the server closed right
// after the TLS handshake. Under TLS 1.3 a server checks the client's
// certificate after the client's side of the handshake is done, so the
// client may see only the closed connection, not the server's alert.
func (o *NATS) tlsHint(err error) string {
	msg := err.Error()
	if !strings.Contains(msg, "after TLS handshake") && !strings.Contains(msg, "tls: certificate required") {
		return ""
	}
	if o.TLSCert == "" {
		return " (the server requires a client certificate: give --nats-tls-cert and --nats-tls-key)"
	}
	return " (the server did not accept the client certificate " + o.TLSCert + ": is it signed by a CA the server trusts?)"
}

// jetstream dials name and wraps the connection as a transport.NATS with
// the replicas asked for; close closes the connection.
func (o *NATS) jetstream(name string) (n *transport.NATS, close func(), err error) {
	nc, err := o.dial(name)
	if err != nil {
		return nil, nil, err
	}
	if n, err = transport.NewNATS(nc); err != nil {
		nc.Close()
		return nil, nil, err
	}
	n.SetReplicas(o.Replicas)
	return n, nc.Close, nil
}

// RedactURL returns the comma-separated URLs in s with any user
// information (user, password or token) replaced by "***", for printing.
func RedactURL(s string) string { return redact.URL(s) }
