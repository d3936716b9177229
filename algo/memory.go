package algo

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"herd/env"
	"herd/internal/sysmem"
)

// ErrMemory marks a configuration whose estimated memory exceeds what the
// machine has available; it is refused before anything is allocated.
var ErrMemory = errors.New("algo: not enough memory")

// MemoryUse is one line of a memory estimate: the config key that drives it
// and the bytes it needs.
type MemoryUse struct {
	Key   string  // e.g. "buffer_size=1000000"
	What  string  // e.g. "replay buffer"
	Bytes float64 // float64: the product of absurd settings must not overflow
}

// EstimateMemory estimates the memory a run needs, from the keys every
// algorithm names alike (num_envs, num_steps, buffer_size, batch_size,
// hidden/net_arch, prioritized) and the env's spaces; envBytes is the
// measured size of one env instance. It is a lower bound of the large
// allocations, not an exact count: rows of float32, nothing for the Go
// runtime or the binary.
func EstimateMemory(h Header, cfg Config, obs, act env.Space, envBytes float64) []MemoryUse {
	obsDim, actDim := float64(obs.Dim()), float64(act.Dim())
	numEnvs, hasEnvs := intKey(cfg, "num_envs")
	if !hasEnvs {
		numEnvs = 1
	}
	var uses []MemoryUse
	add := func(key string, v int64, what string, b float64) {
		uses = append(uses, MemoryUse{Key: fmt.Sprintf("%s=%d", key, v), What: what, Bytes: b})
	}
	add("num_envs", numEnvs, "environments", float64(numEnvs)*(envBytes+8*(obsDim+actDim)))
	if n, ok := intKey(cfg, "num_steps"); ok {
		// obs, action, log-prob, reward, done, value, advantage, return
		add("num_steps", n, "rollout storage", float64(n)*float64(numEnvs)*4*(obsDim+actDim+6))
	}
	if n, ok := intKey(cfg, "buffer_size"); ok {
		row := 4 * (2*obsDim + actDim + 4) // s, s', a, r, terminated, truncated, n-step discount
		if p, _ := boolKey(cfg, "prioritized"); p {
			row += 16 // sum-tree leaf and generation
		}
		add("buffer_size", n, "replay buffer", float64(n)*row)
	}
	// The learner's minibatch: batch_size (off-policy), or the rollout
	// split into num_minibatches (PPO) or whole (A2C).
	batchKey, batch, hasBatch := "batch_size", int64(0), false
	if batch, hasBatch = intKey(cfg, "batch_size"); !hasBatch {
		if t, ok := intKey(cfg, "num_steps"); ok {
			batchKey, batch, hasBatch = "num_envs×num_steps", numEnvs*t, true
			if m, ok := intKey(cfg, "num_minibatches"); ok && m > 0 {
				batchKey, batch = "num_envs×num_steps/num_minibatches", batch/m
			}
		}
	}
	if hasBatch {
		width := obsDim + actDim
		for _, k := range []string{"hidden", "net_arch"} {
			for _, w := range intsKey(cfg, k) {
				width += float64(w)
			}
		}
		// activations and their gradients (float32) for about three
		// networks (actor, critic or twin critics, targets)
		add(batchKey, batch, "minibatch workspaces", float64(batch)*width*4*2*3)
	}
	// Workers beyond the first each hold their own envs (pal actors, dist
	// env workers) or policy copy (dist policy workers), with a goroutine
	// stack and buffers of at least workerBytes.
	envSet := float64(numEnvs) * (envBytes + 8*(obsDim+actDim))
	policy := 4 * 3 * layerParams(obsDim, actDim, cfg)
	rc := h.Runtime
	switch rc.Executor {
	case "pal":
		if n := int64(rc.Actors); n > 1 {
			add("runtime.actors", n, "actors' envs and policy copies", float64(n-1)*(envSet+policy+workerBytes))
		}
	case "dist", "hts":
		if n := int64(rc.EnvWorkers); n > 1 && rc.Executor == "dist" {
			if rc.Inference == InferenceInline {
				// Each holds a policy copy instead of asking policy workers.
				add("runtime.env_workers", n, "env workers' envs and policy copies", float64(n-1)*(envSet+policy+workerBytes))
			} else {
				add("runtime.env_workers", n, "env workers' envs", float64(n-1)*(envSet+workerBytes))
			}
		}
		if n := int64(rc.PolicyWorkers); n > 1 {
			add("runtime.policy_workers", n, "policy workers' policy copies", float64(n-1)*(policy+workerBytes))
		}
	}
	if h.LogEvery > 0 {
		rows := float64(h.Steps) / float64(h.LogEvery)
		uses = append(uses, MemoryUse{Key: fmt.Sprintf("steps/log_every=%d/%d", h.Steps, h.LogEvery), What: "learning curve", Bytes: rows * 16})
	}
	return uses
}

// workerBytes is a lower bound of what one more worker goroutine costs
// besides its envs and weights: stack, channels, batch buffers.
const workerBytes = 64 << 10

// ProcessBytes is a lower bound of one more herd worker process's resident
// memory (the Go runtime, the binary's pages, its NATS connections), for
// launchers that start them (herd launch).
const ProcessBytes = 24 << 20

// layerParams estimates the parameters of one network from the hidden
// widths (hidden or net_arch; 64×64 when the config names none).
func layerParams(obsDim, actDim float64, cfg Config) float64 {
	widths := []float64{obsDim}
	hs := intsKey(cfg, "hidden")
	if len(hs) == 0 {
		hs = intsKey(cfg, "net_arch")
	}
	if len(hs) == 0 {
		hs = []int64{64, 64}
	}
	for _, w := range hs {
		widths = append(widths, float64(w))
	}
	widths = append(widths, actDim)
	var n float64
	for i := 1; i < len(widths); i++ {
		n += (widths[i-1] + 1) * widths[i]
	}
	return n
}

// CheckMemory estimates the memory a run of res needs (EstimateMemory,
// with one env made to measure it) plus extra, and refuses it with
// ErrMemory when it exceeds the memory available, naming the largest
// use. TrainRun does this itself; a launcher calls it before starting
// processes.
func CheckMemory(res *Resolved, extra ...MemoryUse) error {
	e, envBytes, err := envFootprint(res.Header.Env)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	obs, act := e.ObservationSpace(), e.ActionSpace()
	e.Close()
	return checkMemory(append(EstimateMemory(res.Header, res.Config, obs, act, envBytes), extra...))
}

// CheckEnvsMemory refuses, with ErrMemory, n envs of id (key names the
// setting, e.g. "--num-envs 1000000000") when they would not fit the
// memory available: each the heap one env of id takes to make plus its
// observation and action, as EstimateMemory counts num_envs.
func CheckEnvsMemory(id string, n int, key string) error {
	e, envBytes, err := envFootprint(id)
	if err != nil {
		return err
	}
	obs, act := e.ObservationSpace(), e.ActionSpace()
	e.Close()
	per := envBytes + 8*float64(obs.Dim()+act.Dim())
	return checkMemory([]MemoryUse{{Key: key, What: fmt.Sprintf("%d environments of %s", n, id), Bytes: float64(n) * per}})
}

// checkMemory refuses uses whose total exceeds the available memory
// (sysmem.Available), naming the largest.
func checkMemory(uses []MemoryUse) error {
	var total float64
	for _, u := range uses {
		total += u.Bytes
	}
	big := slices.MaxFunc(uses, func(a, b MemoryUse) int { return cmp.Compare(a.Bytes, b.Bytes) })
	avail, src := sysmem.Available()
	if avail <= 0 || total <= float64(avail) {
		return nil // fits, or unknown: nothing to compare with
	}
	return fmt.Errorf("%w: the config needs about %s, more than the %s available (%s); %s alone needs %s for the %s",
		ErrMemory, sysmem.Format(total), sysmem.Format(float64(avail)), src, big.Key, sysmem.Format(big.Bytes), big.What)
}

// envFootprint makes one env of id and returns it (the caller closes it)
// with the heap bytes its construction allocated, at least 1 KiB.
func envFootprint(id string) (env.Env, float64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e, err := env.Make(id)
	if err != nil {
		return nil, 0, err
	}
	runtime.ReadMemStats(&after)
	return e, max(1024, float64(after.TotalAlloc-before.TotalAlloc)), nil
}

// field returns the struct field of cfg tagged yaml:"key", if any.
func field(cfg Config, key string) (reflect.Value, bool) {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}, false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func intKey(cfg Config, key string) (int64, bool) {
	f, ok := field(cfg, key)
	if !ok || !f.CanInt() {
		return 0, false
	}
	return f.Int(), true
}

func boolKey(cfg Config, key string) (bool, bool) {
	f, ok := field(cfg, key)
	if !ok || f.Kind() != reflect.Bool {
		return false, false
	}
	return f.Bool(), true
}

func intsKey(cfg Config, key string) []int64 {
	f, ok := field(cfg, key)
	if !ok || f.Kind() != reflect.Slice || !f.Type().Elem().ConvertibleTo(reflect.TypeFor[int64]()) {
		return nil
	}
	out := make([]int64, f.Len())
	for i := range out {
		out[i] = f.Index(i).Convert(reflect.TypeFor[int64]()).Int()
	}
	return out
}
