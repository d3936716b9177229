package redact

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:pw@h:4222":           "nats://***@h:4222",
		"nats://tok@h:1,tls://a:b@g:2": "nats://***@h:1,tls://***@g:2",
		"nats://u:p@w@h:notaport":      "nats://***@h:notaport",
		"u:secret@host":                "***@host",
		"nats://127.0.0.1:4222":        "nats://127.0.0.1:4222",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecrets(t *testing.T) {
	if got := Secrets(`parse "nats://u:pw@h:x": invalid port`, "pw", ""); got != `parse "nats://u:***@h:x": invalid port` {
		t.Errorf("Secrets = %q", got)
	}
}

// url.Parse's error quotes a malformed URL whole; URLError cuts its user
// information and keeps the error's chain.
func TestURLError(t *testing.T) {
	u := "nats://herd:s3cr3tpw@h:notaport"
	_, perr := url.Parse(u)
	err := URLError(perr, u)
	if strings.Contains(err.Error(), "s3cr3tpw") || strings.Contains(err.Error(), "herd:") {
		t.Errorf("URLError = %v", err)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("URLError lost the chain: %v", err)
	}
	if URLError(nil, u) != nil {
		t.Error("URLError(nil) != nil")
	}
}
