package remote

import (
	"errors"
	"testing"

	"herd/env"
)

// TestDictHasNoWireForm: a Dict is refused by the remote wire's space
// description with a clear error (a remote env serves a Dict env
// flattened: Make's FlattenObservation).
func TestDictHasNoWireForm(t *testing.T) {
	d, err := env.NewDict(map[string]env.Space{"a": env.Discrete{N: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SpaceToProto(d); !errors.Is(err, env.ErrInvalidOption) {
		t.Errorf("SpaceToProto(%v): %v, want env.ErrInvalidOption", d, err)
	}
}
