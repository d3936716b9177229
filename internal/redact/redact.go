// Package redact removes secrets from text meant for people or files:
// the user information of server URLs (NATS, which may carry a user and
// password or a token) and any known secret string.
package redact

import "strings"

// URL returns the comma-separated URLs in s with any user information
// (user, password or token) replaced by "***", for printing or writing
// into a run's files. A part that does not parse as a URL is cut at its
// last "@" the same way, so a malformed URL does not leak either.
func URL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		scheme, rest, ok := strings.Cut(p, "://")
		if !ok {
			scheme, rest = "", p
		}
		host := rest
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			host = "***@" + rest[at+1:]
		}
		if ok {
			parts[i] = scheme + "://" + host
		} else {
			parts[i] = host
		}
	}
	return strings.Join(parts, ",")
}

// Secrets returns s with every non-empty secret replaced by "***".
func Secrets(s string, secrets ...string) string {
	for _, x := range secrets {
		if x != "" {
			s = strings.ReplaceAll(s, x, "***")
		}
	}
	return s
}

// URLError returns err with the user information of the URLs in urls
// (whole, and each password alone) cut from its message: url.Parse's
// error quotes a malformed URL. errors.Is and errors.As still see err.
func URLError(err error, urls string) error {
	if err == nil {
		return nil
	}
	return redactedError{err, urlSecrets(urls)}
}

// urlSecrets returns the user information of each URL in s (whole, and
// its password alone), the strings no message may repeat.
func urlSecrets(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		_, rest, ok := strings.Cut(p, "://")
		if !ok {
			rest = p
		}
		at := strings.LastIndex(rest, "@")
		if at < 0 {
			continue
		}
		info := rest[:at]
		out = append(out, info)
		if _, pw, ok := strings.Cut(info, ":"); ok {
			out = append(out, pw)
		}
	}
	return out
}

// redactedError is err with the secrets cut from its message; errors.Is
// and errors.As still see err.
type redactedError struct {
	err     error
	secrets []string
}

func (e redactedError) Error() string { return Secrets(e.err.Error(), e.secrets...) }
func (e redactedError) Unwrap() error { return e.err }
