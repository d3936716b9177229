package learntest

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"herd/algo"
)

// Pieces is res's algorithm's pieces for the spaces of res's env.
func Pieces(t *testing.T, res *algo.Resolved) *algo.Pieces {
	t.Helper()
	e, err := res.Header.Envs.Make(res.Header.Env)
	if err != nil {
		t.Fatal(err)
	}
	sp := algo.SpacesOf(e)
	e.Close()
	pc, err := res.Spec.Pieces(res.Header, res.Config, sp)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// InitialModel is the model of a segment learner built from res before
// any update: what a run's weights are compared with to show they moved.
func InitialModel(t *testing.T, res *algo.Resolved) algo.Model {
	t.Helper()
	l, err := Pieces(t, res).NewSegmentLearner()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	m, ok := l.(algo.Modeler)
	if !ok {
		t.Fatalf("%s's segment learner has no Model", res.Spec.Name)
	}
	return m.Model()
}

// ModelBytes is m's checkpoint, as Save writes it.
func ModelBytes(t *testing.T, m algo.Model) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// StatsLog is an algo.Logger that keeps each scalar's last value and
// call count, the last step, and the first scalar that was not finite.
type StatsLog struct {
	LastStep  int64
	Stats     map[string]float64
	Calls     map[string]int
	NonFinite string
}

// NewStatsLog returns an empty StatsLog.
func NewStatsLog() *StatsLog {
	return &StatsLog{Stats: map[string]float64{}, Calls: map[string]int{}}
}

func (l *StatsLog) Episode(int64, float64, int) {}

func (l *StatsLog) Scalar(name string, v float64) {
	l.Stats[name] = v
	l.Calls[name]++
	if (math.IsNaN(v) || math.IsInf(v, 0)) && l.NonFinite == "" {
		l.NonFinite = name
	}
}

func (l *StatsLog) Step(s int64) { l.LastStep = s }
