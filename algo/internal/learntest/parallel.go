package learntest

import (
	"bytes"
	"testing"

	"herd/algo"
)

// ParallelSame trains the run that file and set describe twice, with
// parallel=true and parallel=false, and checks that metrics.csv (wall
// columns aside) and the saved model are byte-identical: the second
// goroutine changes where work runs, never what it computes.
func ParallelSame(t *testing.T, spec algo.Spec, file string, set ...string) {
	t.Helper()
	run := func(parallel string) (string, []byte) {
		return TrainFiles(t, Resolve(t, spec, file, append([]string{"parallel=" + parallel}, set...)...))
	}
	csvOn, modelOn := run("true")
	csvOff, modelOff := run("false")
	if csvOn != csvOff {
		t.Errorf("parallel and sequential training wrote different metrics.csv:\n%s\n---\n%s", csvOn, csvOff)
	}
	if !bytes.Equal(modelOn, modelOff) {
		t.Error("parallel and sequential training gave different weights")
	}
	if len(csvOn) == 0 || len(modelOn) == 0 {
		t.Error("nothing to compare: empty metrics or model")
	}
}
