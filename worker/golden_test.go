package worker_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The segments an env worker pushes with a fixed weights version —
// actions, log-probabilities, values, rewards with truncation bootstraps,
// dones, episodes, versions — are pinned by their sha256
// (segmentsWithGroups, G = 1, in sample format 2), so a change to the env-step loop that
// changes one bit fails here; TestEnvGroupsMatchOneGroup and
// TestInlineMatchesPolicyWorker tie G > 1 and inline inference to them.
func TestEnvWorkerSegmentsGolden(t *testing.T) {
	const want = "c58163d67ff038eb95669357735866ea9549b823f52533ca86345db30293f715"
	h := sha256.New()
	for _, b := range segmentsWithGroups(t, 1, 3) {
		h.Write(b)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("segments sha256 %s, want %s", got, want)
	}
}
