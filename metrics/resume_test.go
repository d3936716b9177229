package metrics

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"herd/metrics/tfevents"
)

// feed drives a recorder through steps (from, to], 7 steps at a time, with
// an episode every third call and a scalar every call: the same calls for
// the same steps.
func feed(r *Recorder, from, to int64) {
	for s := from + 7; s <= to; s += 7 {
		if s%3 == 0 {
			r.Episode(s, float64(s%50), int(s%13)+1)
		}
		r.Scalar("loss", float64(s)/10)
		r.Step(s)
	}
}

// TestRecorderResume: a recorder restored from the state of another at
// step 714 (between rows) and fed the same calls after it writes the same metrics.csv
// (wall columns aside), event scalars and summary as one that ran
// through, and summary.json records the step it resumed from. It fails if
// MarshalState leaves out the episode window, the pending "recent" sums,
// the row schedule or the files' bytes.
func TestRecorderResume(t *testing.T) {
	opt := func(dir string) Options {
		return Options{Dir: dir, Algo: "x", Env: "E", TotalSteps: 2100, LogEvery: 100, Scalars: []string{"loss"}}
	}
	whole := t.TempDir()
	r, err := NewRecorder(opt(whole))
	if err != nil {
		t.Fatal(err)
	}
	feed(r, 0, 2100)
	want, err := r.Close(false)
	if err != nil {
		t.Fatal(err)
	}

	first := t.TempDir()
	a, err := NewRecorder(opt(first))
	if err != nil {
		t.Fatal(err)
	}
	feed(a, 0, 714)
	st, err := a.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	feed(a, 714, 1400) // rows after the state that the resumed run must not keep
	a.Close(true)

	resumed := t.TempDir()
	o := opt(resumed)
	o.Resume = st
	b, err := NewRecorder(o)
	if err != nil {
		t.Fatal(err)
	}
	feed(b, 714, 2100)
	got, err := b.Close(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"metrics.csv"} {
		w, _ := os.ReadFile(filepath.Join(whole, f))
		g, _ := os.ReadFile(filepath.Join(resumed, f))
		if !reflect.DeepEqual(stripWall(t, w), stripWall(t, g)) {
			t.Fatalf("%s differs:\n%s\nresumed:\n%s", f, w, g)
		}
	}
	we, err := tfevents.ReadFile(filepath.Join(whole, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	ge, err := tfevents.ReadFile(filepath.Join(resumed, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"loss", "charts/return_mean_100", "charts/episodes"} {
		if len(we[tag]) == 0 || len(we[tag]) != len(ge[tag]) {
			t.Fatalf("events %s: %d points, resumed %d", tag, len(we[tag]), len(ge[tag]))
		}
		for i := range we[tag] {
			if we[tag][i].Step != ge[tag][i].Step || we[tag][i].Value != ge[tag][i].Value {
				t.Fatalf("events %s point %d: %+v, resumed %+v", tag, i, we[tag][i], ge[tag][i])
			}
		}
	}
	if got.ResumedFromStep == nil || *got.ResumedFromStep != 714 {
		t.Fatalf("resumed_from_step %v", got.ResumedFromStep)
	}
	got.ResumedFromStep, got.WallSeconds, got.SPS = nil, 0, 0
	want.WallSeconds, want.SPS = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("summary %+v, want %+v", got, want)
	}
	if len(b.Curve()) != len(r.Curve()) {
		t.Fatalf("curve %d points, want %d", len(b.Curve()), len(r.Curve()))
	}
	sj, _ := os.ReadFile(filepath.Join(resumed, "summary.json"))
	if !bytes.Contains(sj, []byte(`"resumed_from_step": 714`)) {
		t.Fatalf("summary.json: %s", sj)
	}

	// Another run's columns are refused, not mixed in.
	o = Options{Dir: t.TempDir(), LogEvery: 100, Scalars: []string{"other"}, Resume: st}
	if _, err := NewRecorder(o); !errors.Is(err, ErrOptions) {
		t.Fatalf("other columns: %v", err)
	}
}
