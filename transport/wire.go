package transport

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	herdv1 "herd/proto/herd/v1"
)

// Protocol is the wire protocol version this build speaks.
const Protocol = herdv1.DistProtocol_DIST_PROTOCOL_2

// errWrongProtocol marks a decoded message of another protocol version.
var errWrongProtocol = fmt.Errorf("%w: wrong protocol version", ErrMalformed)

// versioned is every wire message: each carries its protocol version.
type versioned interface {
	proto.Message
	GetProtocol() herdv1.DistProtocol
}

// decode unmarshals b into m and checks its protocol version. Every error
// wraps ErrMalformed (and errWrongProtocol for a version mismatch).
func decode(b []byte, m versioned) error {
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if p := m.GetProtocol(); p != Protocol {
		return fmt.Errorf("%w: got %v, speak %v", errWrongProtocol, p, Protocol)
	}
	return nil
}

// encode marshals m; the messages here hold only valid fields, so an error
// is a bug surfaced to the caller rather than a panic.
func encode(m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("dist: encode %T: %w", m, err)
	}
	return b, nil
}

// remoteError turns a peer's refusal text into an error.
func remoteError(s string) error {
	if s == "" {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRejected, s)
}
