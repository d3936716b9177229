package algo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"herd/env"
	"herd/internal/atomicfile"
	"herd/nn"
)

// Metadata keys that TrainRun adds to every model.safetensors, beside the
// algorithm's own, so that a checkpoint says what it was trained for.
const (
	MetaAlgo     = "herd.algo"
	MetaEnv      = "herd.env"
	MetaObsSpace = "herd.observation_space"
	MetaActSpace = "herd.action_space"
)

// ErrCheckpoint marks a checkpoint that does not fit the run or env it is
// used with, or whose weights are not finite.
var ErrCheckpoint = errors.New("algo: checkpoint mismatch")

// checkpointMeta returns the metadata TrainRun writes for a run of h on an
// env with these spaces.
func checkpointMeta(h Header, obs, act env.Space) map[string]string {
	return map[string]string{MetaAlgo: h.Algo, MetaEnv: h.Env, MetaObsSpace: obs.String(), MetaActSpace: act.String()}
}

// saveCheckpoint saves m to path with meta added to the algorithm's own
// metadata, refusing weights that are not all finite. The file appears
// under path only when complete (written beside it, fsynced, renamed).
func saveCheckpoint(m Model, path string, meta map[string]string) error {
	tmp := filepath.Join(filepath.Dir(path), ".save-"+filepath.Base(path))
	defer os.Remove(tmp)
	if err := m.Save(tmp); err != nil {
		return err
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return fmt.Errorf("algo: read back the checkpoint: %w", err)
	}
	ck, err := nn.ReadSafetensors(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("algo: read back the checkpoint: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(ck.Tensors)) {
		t := ck.Tensors[name]
		if i := nonFinite(t.Data); i >= 0 {
			return fmt.Errorf("%w: tensor %s holds %v at index %d; not saved", ErrCheckpoint, name, t.Data[i], i)
		}
	}
	md := map[string]string{}
	maps.Copy(md, ck.Metadata)
	maps.Copy(md, meta)
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return nn.WriteSafetensors(w, ck.Tensors, md)
	})
}

// CheckCheckpoint refuses a checkpoint holding a NaN or infinite weight, and
// compares the metadata of the checkpoint at path with the run it is loaded for: algorithm h.Algo on env h.Env. A checkpoint written
// before herd recorded this metadata passes with a note in the returned
// string. When envOverride is true (the user named another env on purpose),
// a different env id is allowed if its spaces are compatible: the same
// observation shape and kind and the same action space.
func CheckCheckpoint(path string, h Header, envOverride bool) (note string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("algo: %w", err)
	}
	defer f.Close()
	ck, err := nn.ReadSafetensors(f)
	if err != nil {
		return "", fmt.Errorf("algo: %s: %w", path, err)
	}
	for _, name := range slices.Sorted(maps.Keys(ck.Tensors)) {
		if i := nonFinite(ck.Tensors[name].Data); i >= 0 {
			return "", fmt.Errorf("%w: %s: tensor %s holds %v at index %d: the weights are not finite, so no policy can be evaluated",
				ErrCheckpoint, path, name, ck.Tensors[name].Data[i], i)
		}
	}
	md := ck.Metadata
	if md[MetaAlgo] == "" && md[MetaEnv] == "" {
		return path + " records no algorithm or env (written by an older herd): not checked", nil
	}
	if a := md[MetaAlgo]; a != h.Algo {
		return "", fmt.Errorf("%w: %s was trained by %s, not %s", ErrCheckpoint, path, a, h.Algo)
	}
	// The spaces TrainRun recorded (envFootprint's: agents with different
	// action spaces give the widest as a Box).
	e, err := h.Envs.Make(h.Env, env.WithAgentActionSpaces())
	if err != nil {
		return "", fmt.Errorf("algo: %w", err)
	}
	defer e.Close()
	obs, act := e.ObservationSpace(), e.ActionSpace()
	sameSpaces := md[MetaActSpace] == act.String() && shapeOf(md[MetaObsSpace]) == shapeOf(obs.String())
	switch {
	case md[MetaEnv] == h.Env && md[MetaObsSpace] == obs.String() && md[MetaActSpace] == act.String():
		return "", nil
	case md[MetaEnv] != h.Env && !envOverride:
		return "", fmt.Errorf("%w: %s was trained on %s, not %s (name the env with --env to evaluate it on a compatible one)",
			ErrCheckpoint, path, md[MetaEnv], h.Env)
	case !sameSpaces:
		return "", fmt.Errorf("%w: %s was trained on %s with observation space %s and action space %s; %s has %s and %s",
			ErrCheckpoint, path, md[MetaEnv], md[MetaObsSpace], md[MetaActSpace], h.Env, obs, act)
	}
	return fmt.Sprintf("%s was trained on %s; evaluating on %s, whose spaces match", path, md[MetaEnv], h.Env), nil
}

// shapeOf reduces a space's String to its kind and shape, dropping Box
// bounds: "Box([-1 -2], [1 2], [2])" → "Box [2]".
func shapeOf(s string) string {
	kind, rest, ok := strings.Cut(s, "(")
	if !ok || kind != "Box" {
		return s
	}
	if i := strings.LastIndex(rest, ", ["); i >= 0 {
		return kind + " " + strings.TrimSuffix(rest[i+2:], ")")
	}
	return s
}
