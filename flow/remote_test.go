package flow

import (
	"bytes"
	"testing"

	"herd/sample"
)

// The init calls decode to what they encode (γ included: a wrong γ would
// only show where a time limit cuts an episode; the start and the steps:
// a restarted worker's streams and schedules).
func TestInitCallsRoundTrip(t *testing.T) {
	c, err := parseInit(rolloutInit(3, 4, 8, 128, 16, 0.99, 2, 5120)[1:])
	if err != nil || c != (workerInit{kind: kindRollout, x: [5]int{3, 4, 8, 128, 16}, gamma: 0.99, inc: 2, steps: 5120}) {
		t.Errorf("rollout init: %+v, %v", c, err)
	}
	c, err = parseInit(replayInit(1, 2, 50, 4, 3)[1:])
	if err != nil || c != (workerInit{kind: kindReplay, x: [5]int{1, 2, 50, 4}, inc: 3}) {
		t.Errorf("replay init: %+v, %v", c, err)
	}
	c, err = parseInit(replaySlotsInit(1, 2, 4, 3, 1)[1:])
	if err != nil || c != (workerInit{kind: kindReplaySlots, x: [5]int{1, 2, 4, 3}, inc: 1}) {
		t.Errorf("replay slots init: %+v, %v", c, err)
	}
	for _, x := range [][4]int{{0, 2, 2, 1}, {0, 3, 1, 1}, {2, 0, 1, 2}} {
		if _, err := newSlotReplayWorker(&Run{}, x[0], x[1], x[2], x[3], 1); err == nil {
			t.Errorf("slot worker %d of %d with envs %d…%d built", x[0], x[3], x[1], x[2]-1)
		}
	}
	for _, b := range [][]byte{{}, {kindRollout}, rolloutInit(0, 0, 1, 1, 1, 1, 1, 0)[1:40], rolloutInit(0, 0, 3, 1, 2, 1, 1, 0)[1:], append(replayInit(0, 1, 1, 1, 1)[1:], 0),
		replayInit(0, 1, 1, 1, 0)[1:], rolloutInit(0, 0, 1, 1, 1, 1, 1, -1)[1:], append([]byte{9}, make([]byte, 32)...)} {
		if _, err := parseInit(b); err == nil {
			t.Errorf("init call %v accepted", b)
		}
	}
}

// A worker's first start draws from the in-process worker's streams (the
// same bits on either transport); every later start from streams of its
// own, so a restarted worker never replays its seeds.
func TestRestartStreams(t *testing.T) {
	a0, e0 := streams(0)
	a1, e1 := streams(1)
	if a0 != "env-worker" || e0 != "flow/env" || a1 != a0 || e1 != e0 {
		t.Errorf("first start's streams %q %q, %q %q", a0, e0, a1, e1)
	}
	seen := map[string]bool{a1: true, e1: true}
	for inc := uint64(2); inc <= 4; inc++ {
		a, e := streams(inc)
		if seen[a] || seen[e] || a == e {
			t.Errorf("start %d reuses a stream: %q %q", inc, a, e)
		}
		seen[a], seen[e] = true, true
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
