package algo

import (
	"encoding/binary"
	"fmt"
	"math"

	"herd/env"
	"herd/metrics"
)

// TeamScalars returns the metrics.csv columns of a competitive
// multi-agent env's teams (env.AgentTeams: more than one), for each team
// team/<name>/return_mean (the mean over the last 100 episodes of the
// sum of the team's agents' returns) and team/<name>/episodes; nil for
// any other env.
func TeamScalars(mk env.Maker, envID string) []string {
	if !mk.IsParallel(envID) {
		return nil
	}
	p, err := mk.MakeParallel(envID)
	if err != nil {
		return nil // the run reports the env's error itself
	}
	names, _ := env.AgentTeams(p)
	p.Close()
	if len(names) < 2 {
		return nil
	}
	var out []string
	for _, n := range names {
		out = append(out, "team/"+n+"/return_mean", "team/"+n+"/episodes")
	}
	return out
}

// teamer is a multi-agent vector that knows its agents' teams
// (env.FlatVector).
type teamer interface {
	Teams() (names []string, of []int)
}

// TeamLog returns v, a vector of a competitive multi-agent env's rows
// recording episode statistics, wrapped so that every step reports each
// team's return to log (TeamScalars): a team's return in one env's
// episode is the sum of its agents' episode returns there. Any other v is
// returned as it is. Step must be called on the goroutine that owns log.
func TeamLog(v env.Vector, log Logger) env.Vector {
	t, ok := v.(teamer)
	if !ok {
		return v
	}
	names, of := t.Teams()
	if len(names) < 2 || len(of) == 0 || v.NumEnvs()%len(of) != 0 {
		return v
	}
	if log == nil {
		return v
	}
	tv := &teamVector{Vector: v, log: log, of: of, size: make([]int, len(names))}
	for _, n := range names {
		tv.retName = append(tv.retName, "team/"+n+"/return_mean")
		tv.epName = append(tv.epName, "team/"+n+"/episodes")
	}
	for _, k := range of {
		tv.size[k]++
	}
	envs := v.NumEnvs() / len(of)
	tv.acc = make([]float64, envs*len(names))
	tv.got = make([]int, envs*len(names))
	tv.rets = make([][]float64, len(names))
	tv.episodes = make([]int64, len(names))
	return tv
}

type teamVector struct {
	env.Vector
	log      Logger
	retName  []string // per team: its scalars
	epName   []string
	of       []int // team of each agent
	size     []int // agents per team
	acc      []float64
	got      []int // agents of (env, team) whose episode ended
	rets     [][]float64
	episodes []int64
}

// RowActionSpace keeps the wrapped vector's per-row action spaces
// visible (env.SplitVector).
func (t *teamVector) RowActionSpace(r int) env.Space {
	if ra, ok := t.Vector.(interface{ RowActionSpace(int) env.Space }); ok {
		return ra.RowActionSpace(r)
	}
	return t.Vector.ActionSpace()
}

// RowLayout keeps the wrapped vector's layout visible (env.RowsOf).
func (t *teamVector) RowLayout() env.RowLayout {
	l, _ := env.RowsOf(t.Vector)
	return l
}

func (t *teamVector) Step(actions []float32) (*env.Batch, error) {
	b, err := t.Vector.Step(actions)
	if err != nil {
		return b, err
	}
	a, nt := len(t.of), len(t.size)
	for r := range b.Infos {
		if !b.Infos[r].HasEpisode {
			continue
		}
		k := t.of[r%a]
		c := r/a*nt + k
		t.acc[c] += b.Infos[r].Episode.Return
		if t.got[c]++; t.got[c] < t.size[k] {
			continue
		}
		if len(t.rets[k]) == metrics.Window {
			t.rets[k] = t.rets[k][1:]
		}
		t.rets[k] = append(t.rets[k], t.acc[c])
		t.acc[c], t.got[c] = 0, 0
		t.episodes[k]++
		s := 0.0
		for _, x := range t.rets[k] {
			s += x
		}
		t.log.Scalar(t.retName[k], s/float64(len(t.rets[k])))
		t.log.Scalar(t.epName[k], float64(t.episodes[k]))
	}
	return b, nil
}

// MarshalEnvs saves the wrapped vector's rows (env.MarshalVector) and, in
// row 0's state, the teams' accumulators: each env's partial team
// returns and the last returns and episode count of each team
// (env.VectorSnapshotter).
func (t *teamVector) MarshalEnvs() ([][]byte, error) {
	rows, err := env.MarshalVector(t.Vector)
	if err != nil {
		return nil, err
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(rows[0])))
	b = append(b, rows[0]...)
	for c := range t.acc {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t.acc[c]))
		b = binary.LittleEndian.AppendUint64(b, uint64(t.got[c]))
	}
	for k := range t.rets {
		b = binary.LittleEndian.AppendUint64(b, uint64(t.episodes[k]))
		b = binary.LittleEndian.AppendUint64(b, uint64(len(t.rets[k])))
		for _, x := range t.rets[k] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	}
	rows[0] = b
	return rows, nil
}

// UnmarshalEnvs restores what MarshalEnvs saved.
func (t *teamVector) UnmarshalEnvs(state func(i int) ([]byte, error)) error {
	b, err := state(0)
	if err != nil {
		return err
	}
	bad := fmt.Errorf("algo: a saved team state of %d bytes is malformed", len(b))
	if len(b) < 8 || binary.LittleEndian.Uint64(b) > uint64(len(b)-8) {
		return bad
	}
	n := int(binary.LittleEndian.Uint64(b))
	row0, p := b[8:8+n], b[8+n:]
	u64 := func() (uint64, bool) {
		if len(p) < 8 {
			return 0, false
		}
		v := binary.LittleEndian.Uint64(p)
		p = p[8:]
		return v, true
	}
	for c := range t.acc {
		a, ok1 := u64()
		g, ok2 := u64()
		if !ok1 || !ok2 || g > uint64(len(t.of)) {
			return bad
		}
		t.acc[c], t.got[c] = math.Float64frombits(a), int(g)
	}
	for k := range t.rets {
		e, ok1 := u64()
		m, ok2 := u64()
		if !ok1 || !ok2 || m > metrics.Window {
			return bad
		}
		t.episodes[k], t.rets[k] = int64(e), t.rets[k][:0]
		for range m {
			x, ok := u64()
			if !ok {
				return bad
			}
			t.rets[k] = append(t.rets[k], math.Float64frombits(x))
		}
	}
	if len(p) != 0 {
		return bad
	}
	return env.UnmarshalVector(t.Vector, func(i int) ([]byte, error) {
		if i == 0 {
			return row0, nil
		}
		return state(i)
	})
}
