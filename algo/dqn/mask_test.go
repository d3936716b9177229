package dqn

import (
	"errors"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
)

// TestRefusesActionMasks: DQN would act on illegal actions; rows with a
// mask are refused.
func TestRefusesActionMasks(t *testing.T) {
	sp := algo.Spaces{Obs: env.UniformBox(-1, 1, 8), Act: env.Discrete{N: 3}, Rows: env.RowLayout{Agents: 2, Obs: 5, Mask: 3}}
	_, err := newPieces(algo.Header{Steps: 100000, Seed: 1}, NewConfig(), sp)
	if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "action masks") {
		t.Fatalf("err %v", err)
	}
}
