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
