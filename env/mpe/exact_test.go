package mpe

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// table is one file of testdata (see testdata/gen/gen_tables.py).
type table struct {
	Name           string         `json:"name"`
	Env            string         `json:"env"`
	Kwargs         map[string]any `json:"kwargs"`
	PossibleAgents []string       `json:"possible_agents"`
	Episodes       []struct {
		Seed  int64 `json:"seed"`
		Reset struct {
			AgentsPos    [][2]float64         `json:"agents_pos"`
			LandmarksPos [][2]float64         `json:"landmarks_pos"`
			Obs          map[string][]float64 `json:"obs"`
			Goals        []int                `json:"goals"`
		} `json:"reset"`
		Steps []struct {
			Actions      map[string][]float64 `json:"actions"`
			Obs          map[string][]float64 `json:"obs"`
			Rewards      map[string]float64   `json:"rewards"`
			Terminations map[string]bool      `json:"terminations"`
			Truncations  map[string]bool      `json:"truncations"`
			Agents       []string             `json:"agents"`
			State        struct {
				Pos  [][2]float64 `json:"pos"`
				Vel  [][2]float64 `json:"vel"`
				Comm [][]float64  `json:"comm"`
			} `json:"state"`
		} `json:"steps"`
	} `json:"episodes"`
}

func loadTable(t *testing.T, path string) *table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var tb table
	if err := json.NewDecoder(z).Decode(&tb); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &tb
}

// envFor builds the env a table was recorded from, with its keywords.
func envFor(t *testing.T, tb *table) *Env {
	t.Helper()
	num := func(k string, def float64) float64 {
		if v, ok := tb.Kwargs[k]; ok {
			return v.(float64)
		}
		return def
	}
	cont, _ := tb.Kwargs["continuous_actions"].(bool)
	var e *Env
	var err error
	switch tb.Env {
	case "simple_spread_v3":
		e, err = NewSimpleSpread(SpreadConfig{N: int(num("N", 3)), LocalRatio: num("local_ratio", 0.5),
			MaxCycles: int(num("max_cycles", 25)), ContinuousActions: cont})
	case "simple_tag_v3":
		e, err = NewSimpleTag(TagConfig{NumGood: int(num("num_good", 1)), NumAdversaries: int(num("num_adversaries", 3)),
			NumObstacles: int(num("num_obstacles", 2)), MaxCycles: int(num("max_cycles", 25)), ContinuousActions: cont})
	case "simple_reference_v3":
		e, err = NewSimpleReference(ReferenceConfig{LocalRatio: num("local_ratio", 0.5),
			MaxCycles: int(num("max_cycles", 25)), ContinuousActions: cont})
	default:
		t.Fatalf("unknown env %q", tb.Env)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// close1e12 is |got − want| ≤ 1e-12·max(1, |want|).
func close1e12(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

func checkVec(t *testing.T, where string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", where, len(got), len(want))
	}
	for k := range got {
		if !close1e12(got[k], want[k]) {
			t.Fatalf("%s[%d] = %.17g, want %.17g (diff %.3g)", where, k, got[k], want[k], got[k]-want[k])
		}
	}
}

// TestExactPettingZoo replays the transition tables PettingZoo 1.24.3's
// own code produced (testdata/*.json.gz): after each reset it sets the
// world PettingZoo drew, then feeds the recorded actions and checks every
// step's observations (float64 before the float32 cast, and the float32
// values herd returns), rewards, terminations, truncations, remaining
// agents and world state (positions, velocities, communication) at 1e-12.
// Episodes run free from their reset state, so errors would accumulate.
func TestExactPettingZoo(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.json.gz")
	if err != nil || len(paths) != 6 {
		t.Fatalf("want 6 tables in testdata, got %v (%v)", paths, err)
	}
	for _, path := range paths {
		tb := loadTable(t, path)
		t.Run(tb.Name, func(t *testing.T) {
			e := envFor(t, tb)
			if !slices.Equal(e.PossibleAgents(), tb.PossibleAgents) {
				t.Fatalf("agents %v, want %v", e.PossibleAgents(), tb.PossibleAgents)
			}
			steps, comm, nonzero := 0, 0, 0
			act := map[string][]float32{}
			for ei, ep := range tb.Episodes {
				if _, _, err := e.Reset(ep.Seed); err != nil {
					t.Fatal(err)
				}
				st := State{AgentPos: ep.Reset.AgentsPos, LandmarkPos: ep.Reset.LandmarksPos, Goals: ep.Reset.Goals}
				for range st.AgentPos {
					st.AgentVel = append(st.AgentVel, [2]float64{})
					st.AgentComm = append(st.AgentComm, make([]float64, e.w.dimC))
				}
				obs, err := e.SetState(st)
				if err != nil {
					t.Fatal(err)
				}
				for i, a := range e.PossibleAgents() {
					checkVec(t, fmt.Sprintf("episode %d reset obs %s", ei, a), e.obs64[i], ep.Reset.Obs[a])
					checkObs32(t, fmt.Sprintf("episode %d reset obs32 %s", ei, a), obs[a], ep.Reset.Obs[a])
				}
				for si, s := range ep.Steps {
					where := fmt.Sprintf("episode %d step %d", ei, si)
					clear(act)
					for a, v := range s.Actions {
						f := make([]float32, len(v))
						for k := range v {
							f[k] = float32(v[k])
						}
						act[a] = f
					}
					obs, rew, term, trunc, _, err := e.Step(act)
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					for i, a := range e.PossibleAgents() {
						checkVec(t, where+" obs "+a, e.obs64[i], s.Obs[a])
						checkObs32(t, where+" obs32 "+a, obs[a], s.Obs[a])
						if !close1e12(rew[a], s.Rewards[a]) {
							t.Fatalf("%s reward %s = %.17g, want %.17g", where, a, rew[a], s.Rewards[a])
						}
						if rew[a] != 0 {
							nonzero++
						}
						if term[a] != s.Terminations[a] || trunc[a] != s.Truncations[a] {
							t.Fatalf("%s %s: terminated %v truncated %v, want %v %v", where, a, term[a], trunc[a], s.Terminations[a], s.Truncations[a])
						}
					}
					if !slices.Equal(e.Agents(), s.Agents) && !(len(e.Agents()) == 0 && len(s.Agents) == 0) {
						t.Fatalf("%s agents %v, want %v", where, e.Agents(), s.Agents)
					}
					got := e.State()
					for i := range got.AgentPos {
						checkVec(t, fmt.Sprintf("%s pos %d", where, i), got.AgentPos[i][:], s.State.Pos[i][:])
						checkVec(t, fmt.Sprintf("%s vel %d", where, i), got.AgentVel[i][:], s.State.Vel[i][:])
						checkVec(t, fmt.Sprintf("%s comm %d", where, i), got.AgentComm[i], s.State.Comm[i])
						for _, c := range got.AgentComm[i] {
							if c != 0 {
								comm++
								break
							}
						}
					}
					steps++
				}
				if len(e.Agents()) != 0 {
					t.Fatalf("episode %d: agents %v left after the last recorded step", ei, e.Agents())
				}
			}
			t.Logf("%d episodes, %d steps, %d nonzero rewards, %d agent-steps with a nonzero channel", len(tb.Episodes), steps, nonzero, comm)
			if steps < 500 || nonzero == 0 {
				t.Fatalf("table too thin: %d steps, %d nonzero rewards", steps, nonzero)
			}
			if tb.Env == "simple_reference_v3" && comm == 0 {
				t.Fatal("no communication in a simple_reference table")
			}
		})
	}
}

// checkObs32 checks herd's float32 observation is PettingZoo's float64 one
// cast to float32 (to within one float32 step, where the 1e-12 float64
// difference straddles a rounding boundary).
func checkObs32(t *testing.T, where string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", where, len(got), len(want))
	}
	for k := range got {
		w := float32(want[k])
		if got[k] != w && got[k] != math.Nextafter32(w, float32(math.Inf(1))) && got[k] != math.Nextafter32(w, float32(math.Inf(-1))) {
			t.Fatalf("%s[%d] = %v, want %v", where, k, got[k], w)
		}
	}
}
