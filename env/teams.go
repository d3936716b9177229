package env

import (
	"strings"
)

// Teams is implemented by a Parallel whose agents form teams with
// separate interests (a competitive env): Teams names each possible
// agent's team, in PossibleAgents order.
type Teams interface {
	Teams() []string
}

// AgentTeams returns the team names of p (in order of first appearance)
// and, for each possible agent, the index of its team. A Parallel that
// implements Teams names them; for any other the team is the agent's name
// without a trailing "_<number>" (PettingZoo's naming: adversary_0,
// agent_1), so agents named alike form one team. One team means a
// cooperative env, whose return is the sum over agents; with more, each
// team's return is reported on its own, as their sum means nothing.
func AgentTeams(p Parallel) (names []string, of []int) {
	var given []string
	if t, ok := p.(Teams); ok {
		given = t.Teams()
	}
	return agentTeams(p.PossibleAgents(), given)
}

// Teams returns the teams of the vector's agents (AgentTeams of its
// envs; by name for a remote vector) and the team of each agent.
func (f *FlatVector) Teams() (names []string, of []int) {
	if len(f.pv.envs) > 0 {
		return AgentTeams(f.pv.envs[0])
	}
	return agentTeams(f.pv.possible, nil)
}

func agentTeams(agents, given []string) (names []string, of []int) {
	of = make([]int, len(agents))
	for j, a := range agents {
		team := teamOfName(a)
		if len(given) == len(agents) {
			team = given[j]
		}
		k := -1
		for i, n := range names {
			if n == team {
				k = i
			}
		}
		if k < 0 {
			k = len(names)
			names = append(names, team)
		}
		of[j] = k
	}
	return names, of
}

// teamOfName is name without a trailing "_<digits>".
func teamOfName(name string) string {
	i := strings.LastIndexByte(name, '_')
	if i <= 0 || i == len(name)-1 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}
