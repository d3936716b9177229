package atari

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"herd/env/internal/core"
)

// The wrapper names of an env id's wrapper list, and their defaults.
const (
	NameNoopReset    = "noop_reset"    // =N, default 30
	NameMaxAndSkip   = "max_and_skip"  // =K, default 4
	NameEpisodicLife = "episodic_life" //
	NameFireReset    = "fire_reset"    //
	NameClipReward   = "clip_reward"   //
	NameResize       = "resize"        // =N or =HxW, default 84
	NameGrayScale    = "grayscale"     //
	NameFrameStack   = "frame_stack"   // =K, default 4
	// Preset is CleanRL's ppo_atari.py / dqn_atari.py stack, in its order:
	// noop_reset=30, max_and_skip=4, episodic_life, fire_reset when the
	// env's action meanings hold FIRE, clip_reward, resize=84, grayscale,
	// frame_stack=4.
	Preset = "atari"
)

// Wrapper is one parsed entry of a wrapper list.
type Wrapper struct {
	Name string
	// Args are the entry's numbers: N or K (one), or H and W (two).
	Args []int
}

func (w Wrapper) String() string {
	switch len(w.Args) {
	case 0:
		return w.Name
	case 2:
		return fmt.Sprintf("%s=%dx%d", w.Name, w.Args[0], w.Args[1])
	}
	return fmt.Sprintf("%s=%d", w.Name, w.Args[0])
}

// ActionMeanings is implemented by envs that name their actions as ALE's
// get_action_meanings() does ("NOOP", "FIRE", …; nil: no names, as a
// served env without them answers); the atari preset reads it to decide
// on fire_reset.
type ActionMeanings interface {
	ActionMeanings() []string
}

// SplitID splits an env id of the form WRAPPERS:ID, WRAPPERS a
// comma-separated list of wrapper names (each optionally =ARGS), e.g.
// "atari:grpc://host:5005/ALE/BreakoutNoFrameskip-v4" or
// "max_and_skip=4,frame_stack=4:MinAtar/Breakout-v1". ok is false when id
// has no such prefix (the part before the first colon is not a wrapper
// list: "grpc", "shm", a registered id).
func SplitID(id string) (wrappers []Wrapper, inner string, ok bool, err error) {
	head, rest, found := strings.Cut(id, ":")
	if !found {
		return nil, id, false, nil
	}
	for _, part := range strings.Split(head, ",") {
		name, _, _ := strings.Cut(part, "=")
		if !known(name) {
			return nil, id, false, nil
		}
	}
	for _, part := range strings.Split(head, ",") {
		w, err := parseWrapper(part)
		if err != nil {
			return nil, id, true, fmt.Errorf("%w: env %q: %w", core.ErrInvalidOption, id, err)
		}
		wrappers = append(wrappers, w)
	}
	if rest == "" {
		return nil, id, true, fmt.Errorf("%w: env %q: no env id after the wrapper list", core.ErrInvalidOption, id)
	}
	return wrappers, rest, true, nil
}

func known(name string) bool {
	return slices.Contains([]string{NameNoopReset, NameMaxAndSkip, NameEpisodicLife, NameFireReset, NameClipReward,
		NameResize, NameGrayScale, NameFrameStack, Preset}, name)
}

func parseWrapper(s string) (Wrapper, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	w := Wrapper{Name: name}
	switch name {
	case NameNoopReset, NameMaxAndSkip, NameFrameStack:
		def := map[string]int{NameNoopReset: 30, NameMaxAndSkip: 4, NameFrameStack: 4}[name]
		w.Args = []int{def}
		if hasArg {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return w, fmt.Errorf("%s=%s: want a positive integer", name, arg)
			}
			w.Args[0] = n
		}
	case NameResize:
		w.Args = []int{84, 84}
		if hasArg {
			hs, ws, two := strings.Cut(arg, "x")
			if !two {
				ws = hs
			}
			h, err1 := strconv.Atoi(hs)
			wd, err2 := strconv.Atoi(ws)
			if err1 != nil || err2 != nil || h < 1 || wd < 1 {
				return w, fmt.Errorf("resize=%s: want N or HxW, positive integers", arg)
			}
			w.Args = []int{h, wd}
		}
	default:
		if hasArg {
			return w, fmt.Errorf("%s takes no argument, got %s=%s", name, name, arg)
		}
	}
	return w, nil
}

// Expand replaces the atari preset by its wrappers for env e (the
// innermost env, whose action meanings decide fire_reset). An env that
// does not report action meanings cannot take the preset: whether FIRE
// resets is then unknown, and the error names the explicit lists.
func Expand(ws []Wrapper, e core.Env) ([]Wrapper, error) {
	var out []Wrapper
	for _, w := range ws {
		if w.Name != Preset {
			out = append(out, w)
			continue
		}
		am, ok := unwrapped(e).(ActionMeanings)
		if !ok || len(am.ActionMeanings()) == 0 {
			return nil, fmt.Errorf("%w: the %s preset adds fire_reset when the env's action meanings hold FIRE, and this env reports none; list the wrappers instead: %s (or without fire_reset)",
				core.ErrInvalidOption, Preset, presetList(true))
		}
		out = append(out, presetWrappers(slices.Contains(am.ActionMeanings(), "FIRE"))...)
	}
	return out, nil
}

func presetWrappers(fire bool) []Wrapper {
	ws := []Wrapper{{NameNoopReset, []int{30}}, {NameMaxAndSkip, []int{4}}, {Name: NameEpisodicLife}}
	if fire {
		ws = append(ws, Wrapper{Name: NameFireReset})
	}
	return append(ws, Wrapper{Name: NameClipReward}, Wrapper{NameResize, []int{84, 84}}, Wrapper{Name: NameGrayScale}, Wrapper{NameFrameStack, []int{4}})
}

func presetList(fire bool) string {
	var s []string
	for _, w := range presetWrappers(fire) {
		s = append(s, w.String())
	}
	return strings.Join(s, ",")
}

func unwrapped(e core.Env) core.Env {
	for {
		w, ok := e.(core.Wrapper)
		if !ok {
			return e
		}
		e = w.Unwrap()
	}
}

// Apply wraps e in ws, the first innermost (the atari preset expanded
// first). On error e is left open; the caller closes it.
func Apply(e core.Env, ws []Wrapper) (core.Env, error) {
	ws, err := Expand(ws, e)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		var next core.Env
		switch w.Name {
		case NameNoopReset:
			next, err = NewNoopReset(e, w.Args[0])
		case NameMaxAndSkip:
			next, err = NewMaxAndSkip(e, w.Args[0])
		case NameEpisodicLife:
			next, err = NewEpisodicLife(e)
		case NameFireReset:
			next, err = NewFireReset(e)
		case NameClipReward:
			next = NewClipReward(e)
		case NameResize:
			next, err = NewResize(e, w.Args[0], w.Args[1])
		case NameGrayScale:
			next, err = NewGrayScale(e)
		case NameFrameStack:
			next, err = NewFrameStack(e, w.Args[0])
		default:
			err = fmt.Errorf("%w: unknown env wrapper %q", core.ErrInvalidOption, w.Name)
		}
		if err != nil {
			return nil, err
		}
		e = next
	}
	return e, nil
}
