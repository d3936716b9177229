package envsvc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/env"
	"herd/run"
)

// signalPolicies is toy/signal_v0 (speaker_0 Discrete(4), listener_0
// Discrete(5)) with a PPO policy per agent.
const signalPolicies = `algo: ppo
seed: 3
steps: 640
multiagent:
  policies: [speaker, listener]
  policy_mapping: {speaker_0: speaker, listener_0: listener}
ppo: {num_envs: 8, num_steps: 16, num_minibatches: 2, hidden: [16]}
`

// trainSignal trains signalPolicies on envID under executor and returns
// the checkpoint's layout (its safetensors header less the env id: the
// tensors' names and shapes, the spaces, the policies) and its tensors.
func trainSignal(t *testing.T, envID, executor string) (layout string, tensors []byte) {
	t.Helper()
	file := signalPolicies + "env: " + envID + "\nruntime: {executor: " + executor + "}\n"
	res, err := algo.Resolve([]byte(file), all.Specs(), algo.Overrides{Envs: envs()})
	if err != nil {
		t.Fatalf("%s %s: %v", executor, envID, err)
	}
	res.Header.Out = t.TempDir()
	if _, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: run.Executors(), Dir: algo.DirForce, EvalEpisodes: 4}); err != nil {
		t.Fatalf("%s %s: %v", executor, envID, err)
	}
	// herd eval's path: each policy loaded from the checkpoint on its own
	// env id (act_as).
	var out, notes bytes.Buffer
	if err := run.Eval(context.Background(), &out, &notes, run.EvalOptions{Envs: envs(), Dir: res.Header.Out, Episodes: 2, Specs: all.Specs()}); err != nil {
		t.Fatalf("%s %s: eval: %v (notes %s)", executor, envID, err, notes.String())
	}
	b, err := os.ReadFile(filepath.Join(res.Header.Out, algo.ModelFile))
	if err != nil || len(b) < 8 {
		t.Fatalf("%s %s: model: %v", executor, envID, err)
	}
	n := 8 + binary.LittleEndian.Uint64(b)
	var head map[string]any
	if err := json.Unmarshal(b[8:n], &head); err != nil {
		t.Fatal(err)
	}
	delete(head["__metadata__"].(map[string]any), "herd.env")
	l, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	return string(l), b[n:]
}

// sameSignalRun: the run on remote gives the local id's checkpoint under
// each executor: the same layout, and under local and hts the same
// tensors bit for bit (dist's updates depend on which segments meet, a
// matter of timing, so only its layout is compared).
func sameSignalRun(t *testing.T, remote string, executors ...string) {
	t.Helper()
	for _, ex := range executors {
		wantL, want := trainSignal(t, "toy/signal_v0", ex)
		gotL, got := trainSignal(t, remote, ex)
		if wantL != gotL {
			t.Errorf("%s: %s: checkpoint layout\n%s\nwant the local id's\n%s", ex, remote, gotL, wantL)
		}
		if len(want) == 0 || ex != "dist" && !bytes.Equal(want, got) {
			t.Errorf("%s: %s: checkpoint tensors differ from the local id's (%d and %d bytes)", ex, remote, len(want), len(got))
		}
	}
}

// TestRemoteMixedActionSpaces: a remote env whose agents have different
// action spaces trains a policy per agent, each network sized to its own
// agent's space (act_as on the remote id, kept on this side), and ends
// with the local id's parameters, bit for bit, under local and HTS, and
// with its checkpoint layout under dist.
func TestRemoteMixedActionSpaces(t *testing.T) {
	if testing.Short() {
		t.Skip("trains PPO twice per executor")
	}
	addr, _ := startServer(t, nil, 0)
	sameSignalRun(t, "grpc://"+addr+"/toy/signal_v0?timeout=20s", "local", "hts", "dist")
}

// TestRemoteOnePolicyMixedSpacesRefused: one policy for a remote env's
// agents of different action spaces is refused before training, naming
// the agents and their spaces, as for a local id.
func TestRemoteOnePolicyMixedSpacesRefused(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	file := strings.NewReplacer("[speaker, listener]", "[speaker]", "listener_0: listener", "listener_0: speaker").Replace(signalPolicies) +
		"env: grpc://" + addr + "/toy/signal_v0\n"
	res, err := algo.Resolve([]byte(file), all.Specs(), algo.Overrides{Envs: envs()})
	if err == nil {
		_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true, Executors: run.Executors()})
	}
	want := "policy speaker acts for agents speaker_0 (action space Discrete(4, start=0)) and listener_0 (Discrete(5, start=0))"
	if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("err %v, want ErrConfig containing %q", err, want)
	}
}

// TestRemoteActAs: act_as on a remote multi-agent id makes env.Make's
// TurnEnv report that agent's own action space, as on the local id; an
// agent the server does not list, an empty act_as and act_as on a
// single-agent id are refused.
func TestRemoteActAs(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	for _, a := range []string{"speaker_0", "listener_0"} {
		spaces := make([]string, 2)
		for i, id := range []string{"toy/signal_v0", "grpc://" + addr + "/toy/signal_v0"} {
			e, err := envs().Make(id + "?act_as=" + a)
			if err != nil {
				t.Fatalf("%s act_as %s: %v", id, a, err)
			}
			spaces[i] = e.ActionSpace().String()
			e.Close()
		}
		if spaces[0] != spaces[1] {
			t.Errorf("act_as %s: remote action space %s, want the local id's %s", a, spaces[1], spaces[0])
		}
	}
	if _, err := envs().Make("grpc://" + addr + "/toy/signal_v0?act_as=nobody"); !errors.Is(err, env.ErrInvalidOption) || !strings.Contains(err.Error(), `act_as "nobody" is not an agent`) {
		t.Errorf("act_as nobody: err %v, want ErrInvalidOption naming it", err)
	}
	for _, id := range []string{"toy/signal_v0?act_as=", "CartPole-v1?act_as=a"} {
		if _, err := envs().Make("grpc://" + addr + "/" + id); !errors.Is(err, env.ErrInvalidOption) || !strings.Contains(err.Error(), "act_as") {
			t.Errorf("%s: err %v, want ErrInvalidOption naming act_as", id, err)
		}
	}
}
