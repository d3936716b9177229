package redact

import "testing"

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
