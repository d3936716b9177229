package minatar

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"
)

// seaquestScenario is one entry of testdata/seaquest_scenarios.json.gz: a
// state set by hand on MinAtar's own Seaquest, then played.
type seaquestScenario struct {
	Rule  string `json:"rule"`
	Seed  int64  `json:"seed"`
	State struct {
		Oxygen      int     `json:"oxygen"`
		DiverCount  int     `json:"diver_count"`
		SubX        int     `json:"sub_x"`
		SubY        int     `json:"sub_y"`
		SubOr       bool    `json:"sub_or"`
		FBullets    [][]any `json:"f_bullets"`
		EBullets    [][]any `json:"e_bullets"`
		EFish       [][]any `json:"e_fish"`
		ESubs       [][]any `json:"e_subs"`
		Divers      [][]any `json:"divers"`
		ESpawnSpeed int     `json:"e_spawn_speed"`
		ESpawnTimer int     `json:"e_spawn_timer"`
		DSpawnTimer int     `json:"d_spawn_timer"`
		MoveSpeed   int     `json:"move_speed"`
		RampIndex   int     `json:"ramp_index"`
		ShotTimer   int     `json:"shot_timer"`
		Surface     bool    `json:"surface"`
		Terminal    bool    `json:"terminal"`
	} `json:"state"`
	Obs       []string `json:"obs"`
	Actions   []int    `json:"actions"`
	Rewards   []int    `json:"rewards"`
	Terminals []bool   `json:"terminals"`
}

// objects converts MinAtar's lists [x, y, right, move?, shot?].
func objects(t *testing.T, g *seaquest, rows [][]any) objList {
	t.Helper()
	var l objList
	for _, r := range rows {
		var o obj
		for i, v := range r {
			switch x := v.(type) {
			case bool:
				if i != 2 {
					t.Fatalf("object %v: bool at %d", r, i)
				}
				o.right = x
			case float64:
				n := int(x)
				switch i {
				case 0:
					o.x = n
				case 1:
					o.y = n
				case 3:
					o.move = n
				case 4:
					o.shot = n
				default:
					t.Fatalf("object %v: number at %d", r, i)
				}
			default:
				t.Fatalf("object %v: %T at %d", r, v, i)
			}
		}
		l = append(l, g.newObj(o))
	}
	return l
}

// TestSeaquestScenarios replays states set by hand on MinAtar's own game:
// a sub destroyed in the frame it fires (no played episode reaches it) and
// surfacing with six divers, then with a negative diver count.
func TestSeaquestScenarios(t *testing.T) {
	f, err := os.Open("testdata/seaquest_scenarios.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenarios []seaquestScenario `json:"scenarios"`
	}
	if err := json.NewDecoder(z).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Scenarios) < 2 {
		t.Fatalf("%d scenarios", len(doc.Scenarios))
	}
	for _, sc := range doc.Scenarios {
		t.Run(sc.Rule, func(t *testing.T) {
			e, err := New(Config{Game: "seaquest", StickyActionProb: 0, DifficultyRamping: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.Reset(sc.Seed); err != nil {
				t.Fatal(err)
			}
			g := e.g.(*seaquest)
			s := sc.State
			g.oxygen, g.diverCount, g.subX, g.subY, g.subRight = s.Oxygen, s.DiverCount, s.SubX, s.SubY, s.SubOr
			g.fBullets, g.eBullets = objects(t, g, s.FBullets), objects(t, g, s.EBullets)
			g.fish, g.subs, g.divers = objects(t, g, s.EFish), objects(t, g, s.ESubs), objects(t, g, s.Divers)
			g.eSpawnSpeed, g.eSpawnTimer, g.dSpawnTimer = s.ESpawnSpeed, s.ESpawnTimer, s.DSpawnTimer
			g.moveSpeed, g.rampIndex, g.shotTimer, g.surface, g.terminal = s.MoveSpeed, s.RampIndex, s.ShotTimer, s.Surface, s.Terminal
			n := e.ObservationSpace().Dim()
			if obs, want := e.observe(), unpack(t, sc.Obs[0], n); !equalFloats(obs, want) {
				t.Fatalf("state set: observation differs, %s", diffObs(obs, want, 10))
			}
			for i, a := range sc.Actions {
				obs, r, term, _, _, err := e.Step([]float32{float32(a)})
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if want := unpack(t, sc.Obs[i+1], n); !equalFloats(obs, want) {
					t.Fatalf("step %d (action %d): observation differs, %s", i, a, diffObs(obs, want, 10))
				}
				if r != float64(sc.Rewards[i]) || term != sc.Terminals[i] {
					t.Fatalf("step %d: reward %v terminated %v, MinAtar %d %v", i, r, term, sc.Rewards[i], sc.Terminals[i])
				}
			}
		})
	}
}
