package minatar

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"herd/env/internal/core"
)

// table is one file of testdata, written by MinAtar's own code
// (testdata/gen/gen_tables.py).
type table struct {
	Game             string  `json:"game"`
	StateShape       []int   `json:"state_shape"`
	StickyActionProb float64 `json:"sticky_action_prob"`
	Ramping          bool    `json:"difficulty_ramping"`
	Cases            []struct {
		Seed      int64 `json:"seed"`
		Minimal   bool  `json:"minimal_action_set"`
		ActionSet []int `json:"action_set"`
		Episodes  []struct {
			Obs       []string `json:"obs"`
			Actions   []int    `json:"actions"`
			Rewards   []int    `json:"rewards"`
			Terminals []bool   `json:"terminals"`
			Ramps     []int    `json:"ramps"`
		} `json:"episodes"`
	} `json:"cases"`
}

// tablesDir lets a developer replay other tables written by
// testdata/gen/gen_tables.py (e.g. many more seeds with --seeds).
var tablesDir = flag.String("minatar.tables", "testdata", "directory of MinAtar tables to replay")

func loadTable(t *testing.T, game string) *table {
	t.Helper()
	path := filepath.Join(*tablesDir, game+".json.gz")
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
	if tb.Game != game || len(tb.Cases) == 0 {
		t.Fatalf("%s: game %q with %d cases", path, tb.Game, len(tb.Cases))
	}
	return &tb
}

// unpack expands a packed observation (row-major [10, 10, C], 8 cells a
// byte, most significant bit first) into 0/1 floats.
func unpack(t *testing.T, s string, n int) []float32 {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != (n+7)/8 {
		t.Fatalf("packed observation %q: %v (%d bytes, want %d)", s, err, len(b), (n+7)/8)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(b[i>>3] >> (7 - i&7) & 1)
	}
	return out
}

// diffObs describes the first cell where got and want differ.
func diffObs(got, want []float32, nc int) string {
	for i := range want {
		if got[i] != want[i] {
			c, cell := i%nc, i/nc
			return fmt.Sprintf("first at row %d col %d channel %d: %v, MinAtar %v", cell/size, cell%size, c, got[i], want[i])
		}
	}
	return "none"
}

// TestExactMinAtar replays every table MinAtar's own code wrote: each case
// seeds one env, plays its episodes on that stream (reseeding only
// before the first), and every observation channel, reward, terminal flag
// and difficulty level must be equal at every step. A case stops at its
// first difference; the other cases still run.
func TestExactMinAtar(t *testing.T) {
	for _, game := range exactGames {
		t.Run(game, func(t *testing.T) {
			tb := loadTable(t, game)
			steps, episodes := 0, 0
			for ci := range tb.Cases {
				s, e, err := replayCase(t, tb, ci)
				if err != nil {
					t.Errorf("%s seed %d: %v", game, tb.Cases[ci].Seed, err)
				}
				steps += s
				episodes += e
			}
			t.Logf("%s: %d episodes, %d steps equal MinAtar's", game, episodes, steps)
		})
	}
}

// replayCase replays case ci of tb and returns the steps and whole
// episodes that matched, and the first difference.
func replayCase(t *testing.T, tb *table, ci int) (steps, episodes int, err error) {
	c := tb.Cases[ci]
	cfg := Config{Game: tb.Game, MinimalActionSet: c.Minimal, StickyActionProb: tb.StickyActionProb,
		DifficultyRamping: tb.Ramping}
	e, err := New(cfg)
	if err != nil {
		return 0, 0, err
	}
	if got := e.ActionSet(); !equalInts(got, c.ActionSet) {
		return 0, 0, fmt.Errorf("action set %v, MinAtar %v", got, c.ActionSet)
	}
	if sh := e.ObservationSpace().Shape(); !equalInts(sh, tb.StateShape) {
		return 0, 0, fmt.Errorf("observation shape %v, MinAtar %v", sh, tb.StateShape)
	}
	n := e.ObservationSpace().Dim()
	nc := tb.StateShape[2]
	for ei, ep := range c.Episodes {
		seed := core.NoSeed
		if ei == 0 {
			seed = c.Seed
		}
		obs, _, err := e.Reset(seed)
		if err != nil {
			return steps, episodes, err
		}
		if want := unpack(t, ep.Obs[0], n); !equalFloats(obs, want) {
			return steps, episodes, fmt.Errorf("episode %d reset: observation differs, %s", ei, diffObs(obs, want, nc))
		}
		for i, a := range ep.Actions {
			obs, r, term, trunc, _, err := e.Step([]float32{float32(a)})
			if err != nil {
				return steps, episodes, fmt.Errorf("episode %d step %d: %w", ei, i, err)
			}
			if want := unpack(t, ep.Obs[i+1], n); !equalFloats(obs, want) {
				return steps, episodes, fmt.Errorf("episode %d step %d (action %d): observation differs, %s", ei, i, a, diffObs(obs, want, nc))
			}
			if r != float64(ep.Rewards[i]) || term != ep.Terminals[i] || trunc {
				return steps, episodes, fmt.Errorf("episode %d step %d: reward %v terminated %v truncated %v, MinAtar %d %v false",
					ei, i, r, term, trunc, ep.Rewards[i], ep.Terminals[i])
			}
			if got := e.DifficultyRamp(); got != ep.Ramps[i] {
				return steps, episodes, fmt.Errorf("episode %d step %d: difficulty ramp %d, MinAtar %d", ei, i, got, ep.Ramps[i])
			}
			steps++
		}
		if !ep.Terminals[len(ep.Terminals)-1] {
			return steps, episodes, fmt.Errorf("episode %d does not end terminal", ei)
		}
		episodes++
	}
	return steps, episodes, nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
