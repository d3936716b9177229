package flow

import (
	"bytes"
	"testing"

	"herd/sample"
)

// The init calls decode to what they encode (γ included: a wrong γ would
// only show where a time limit cuts an episode).
func TestInitCallsRoundTrip(t *testing.T) {
	kind, x, gamma, err := parseInit(rolloutInit(3, 4, 8, 128, 0.99)[1:])
	if err != nil || kind != kindRollout || x != [4]int{3, 4, 8, 128} || gamma != 0.99 {
		t.Errorf("rollout init: kind %d, %v, γ %v, %v", kind, x, gamma, err)
	}
	kind, x, gamma, err = parseInit(replayInit(1, 2, 50, 4)[1:])
	if err != nil || kind != kindReplay || x != [4]int{1, 2, 50, 4} || gamma != 0 {
		t.Errorf("replay init: kind %d, %v, γ %v, %v", kind, x, gamma, err)
	}
	for _, b := range [][]byte{{}, {kindRollout}, rolloutInit(0, 0, 1, 1, 1)[1:20], append(replayInit(0, 1, 1, 1)[1:], 0), {9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, _, _, err := parseInit(b); err == nil {
			t.Errorf("init call %v accepted", b)
		}
	}
}

// An experience reply decodes to the report and transitions encoded.
func TestExperienceRoundTrip(t *testing.T) {
	tr := sample.NewTransitions(2, 1, 1)
	tr.Obs[1], tr.Rewards[0], tr.Version, tr.Worker = 3, 1.5, 7, 1
	tr.Episodes = []sample.Episode{{Return: 12, Length: 12, At: 1}}
	x := Experience{Transitions: tr, Report: Report{Steps: 4, Episodes: []sample.Episode{{Return: 12, Length: 12, At: 3}}}}
	b, err := appendExperience(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeExperience(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Report.Steps != 4 || len(got.Report.Episodes) != 1 || got.Report.Episodes[0] != x.Report.Episodes[0] {
		t.Errorf("report %+v, want %+v", got.Report, x.Report)
	}
	b2, _ := got.Transitions.AppendEncode(nil)
	b1, _ := tr.AppendEncode(nil)
	if !bytes.Equal(b1, b2) {
		t.Error("transitions changed in the round trip")
	}
	if _, err := decodeExperience(b[:len(b)-1]); err == nil {
		t.Error("a cut reply decoded")
	}
	if _, err := decodeExperience(b[:13]); err == nil {
		t.Error("a reply cut inside its episodes decoded")
	}
}
