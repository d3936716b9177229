package algo

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"herd/env"
	"herd/internal/sysmem"
	"herd/replay"
	"herd/sample"
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
// prioritized), the networks the algorithm lists (Networker: parameters,
// gradients and optimizer moments of every network, targets and twins
// included, and the copies workers and extra learners hold) and the env's
// spaces; envBytes is the measured size of one env instance. It is a lower
// bound of the large allocations, not an exact count: rows of float32
// (the replay's observations in their encoding, ReplayObsEncoding),
// nothing for the Go runtime or the binary. workers are the executor's
// workers that hold envs, policy copies or learners of their own
// (Executor.Workers).
func EstimateMemory(h Header, cfg Config, obs, act env.Space, envBytes float64, workers []WorkerSet) []MemoryUse {
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
		// s, s' (in the encoding their space allows), a, r, the done
		// flags, an n-step discount, the slot's generation.
		nSteps, _ := intKey(cfg, "n_steps")
		row := float64(ReplayStorage(obs.Dim(), act.Dim(), int(nSteps), ReplayObsEncoding(obs)).SlotBytes())
		if p, _ := boolKey(cfg, "prioritized"); p {
			row += 5 // sum tree: a float32 leaf, float64 inner sums (about 1.2 a slot at fanout 8)
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
	nets := NetworksOf(cfg, obs, act)
	if hasBatch {
		// Activations and their gradients (float32) of every layer of
		// every network, one row per minibatch row.
		var width float64
		for _, n := range nets {
			width += n.width()
		}
		add(batchKey, batch, "minibatch workspaces", float64(batch)*width*4*2)
	}
	// The learner's networks: values and gradients of every parameter,
	// and the optimizer's moments of those it trains.
	var learner, policy float64
	var names []string
	for _, n := range nets {
		learner += n.Bytes()
		names = append(names, n.Name)
		if n.Acts {
			policy += n.copyBytes()
		}
	}
	netKey := networkKey(cfg)
	uses = append(uses, MemoryUse{Key: netKey, What: "networks (" + strings.Join(names, ", ") + "): parameters, gradients and optimizer moments", Bytes: learner})
	// Workers beyond the first each hold their own envs (pal actors, dist
	// env workers) or policy copy (dist policy workers), with a goroutine
	// stack and buffers of at least workerBytes; learners beyond the first
	// (pal, dist) a whole learner each.
	envSet := float64(numEnvs) * (envBytes + 8*(obsDim+actDim))
	for _, w := range workers {
		if w.N <= 1 {
			continue
		}
		if w.Learner {
			uses = append(uses, MemoryUse{Key: fmt.Sprintf("runtime.%s=%d", w.Key, w.N), What: "learners' networks (" + netKey + ")", Bytes: float64(w.N-1) * learner})
			continue
		}
		if !w.Envs && !w.Policy {
			continue
		}
		bytes, holds := float64(workerBytes), []string{}
		if w.Envs {
			bytes, holds = bytes+envSet, append(holds, "envs")
		}
		if w.Policy {
			bytes, holds = bytes+policy, append(holds, "policy copies")
		}
		add("runtime."+w.Key, int64(w.N), strings.ReplaceAll(w.Key, "_", " ")+"' "+strings.Join(holds, " and "), float64(w.N-1)*bytes)
	}
	if h.LogEvery > 0 {
		rows := float64(h.Steps) / float64(h.LogEvery)
		uses = append(uses, MemoryUse{Key: fmt.Sprintf("steps/log_every=%d/%d", h.Steps, h.LogEvery), What: "learning curve", Bytes: rows * 16})
	}
	return uses
}

// ReplayStorage is the shape of the off-policy replay memory's rows
// (offpolicy.NewReplay's buffer, and EstimateMemory's count of it) for
// observations of obsDim values stored in encoding enc
// (ReplayObsEncoding), actions of actDim values and n-step returns
// (nSteps ≤ 1: one-step); capacity and sampling settings are the
// caller's. With n > 1 each observation carries one more value, float32
// whatever the encoding: the next observation's discount γ^m.
func ReplayStorage(obsDim, actDim, nSteps int, enc sample.ObsEncoding) replay.Config {
	c := replay.Config{ObsSize: obsDim, ActSize: actDim, ObsEncoding: enc}
	if nSteps > 1 {
		c.ObsSize++
		c.ObsFloatTail = 1
	}
	return c
}

// ReplayObsEncoding is the encoding of package sample that off-policy
// replay memories store observations of space obs in: bits when every
// bound of a Box lies in [0, 1] (binary planes such as MinAtar's: 32
// times smaller than float32), bytes when in [0, 255] (8-bit pixels),
// float32 otherwise. Bounds do not promise 0/1 or integer values, so the
// buffer widens itself, once, when a value does not fit
// (replay.Config.ObsEncoding); EstimateMemory then counts too little.
func ReplayObsEncoding(obs env.Space) sample.ObsEncoding {
	b, ok := obs.(env.Box)
	if !ok || len(b.Low) == 0 {
		return sample.ObsFloat32
	}
	enc := sample.ObsBits
	for i := range b.Low {
		switch {
		case !(b.Low[i] >= 0) || !(b.High[i] <= 255):
			return sample.ObsFloat32
		case b.High[i] > 1:
			enc = sample.ObsUint8
		}
	}
	return enc
}

// workerBytes is a lower bound of what one more worker goroutine costs
// besides its envs and weights: stack, channels, batch buffers.
const workerBytes = 64 << 10

// ProcessBytes is a lower bound of one more herd worker process's resident
// memory (the Go runtime, the binary's pages, its NATS connections), for
// launchers that start them (herd launch).
const ProcessBytes = 24 << 20

// Network describes one network a run's learner holds, for
// EstimateMemory: an MLP from In inputs through Hidden to Out outputs.
type Network struct {
	Name    string // e.g. "actor", "q1 target"
	In, Out int
	Hidden  []int
	// Moments is the optimizer's state per parameter: 2 for Adam, 1 for
	// RMSProp, 0 for a network that is not trained (a target network).
	Moments int
	// Acts: a policy copy (an actor's or env worker's) holds this network.
	Acts bool
}

// Params is the network's parameter count (weights and biases).
func (n Network) Params() float64 {
	var p float64
	prev := float64(n.In)
	for _, w := range append(slices.Clone(n.Hidden), n.Out) {
		p += (prev + 1) * float64(w)
		prev = float64(w)
	}
	return p
}

// Bytes is what the learner's copy takes: float32 values and gradients
// (every nn.Param has both) and the optimizer's moments.
func (n Network) Bytes() float64 { return 4 * float64(2+n.Moments) * n.Params() }

// copyBytes is what a policy copy of the network takes (values and
// gradients).
func (n Network) copyBytes() float64 { return 4 * 2 * n.Params() }

// width is the sum of the network's layer widths: the floats of one
// minibatch row's activations.
func (n Network) width() float64 {
	w := float64(n.In + n.Out)
	for _, h := range n.Hidden {
		w += float64(h)
	}
	return w
}

// Networker is implemented by a Config that lists its learner's networks
// (every one: actor, critics, target and twin copies) for the spaces of
// its env.
type Networker interface {
	Networks(obs, act env.Space) []Network
}

// NetworksOf returns cfg's networks (Networker); for a Config that does
// not list them, one network of its hidden or net_arch widths (64×64 when
// it names none) trained with Adam, which every algorithm has at least.
func NetworksOf(cfg Config, obs, act env.Space) []Network {
	if n, ok := cfg.(Networker); ok {
		return n.Networks(obs, act)
	}
	var hidden []int
	for _, w := range hiddenKey(cfg) {
		hidden = append(hidden, int(w))
	}
	if len(hidden) == 0 {
		hidden = []int{64, 64}
	}
	return []Network{{Name: "network", In: obs.Dim(), Out: OutWidth(act), Hidden: hidden, Moments: 2, Acts: true}}
}

// OutWidth is the width of a network output layer that scores or
// parameterizes the actions of act: one logit per action of a Discrete
// space, one value per dimension otherwise.
func OutWidth(act env.Space) int {
	if d, ok := act.(env.Discrete); ok {
		return d.N
	}
	return act.Dim()
}

// hiddenKey returns the config's hidden (or net_arch) widths.
func hiddenKey(cfg Config) []int64 {
	if hs := intsKey(cfg, "hidden"); len(hs) > 0 {
		return hs
	}
	return intsKey(cfg, "net_arch")
}

// networkKey names the config key that sizes the networks, with its
// value: "hidden=[100000 100000]".
func networkKey(cfg Config) string {
	for _, k := range []string{"hidden", "net_arch"} {
		if hs := intsKey(cfg, k); len(hs) > 0 {
			return fmt.Sprintf("%s=%v", k, hs)
		}
	}
	return "hidden (default)"
}

// CheckMemory estimates the memory a run of res needs (EstimateMemory,
// with one env made to measure it, and the executor's workers) plus extra, and refuses it with
// ErrMemory when it exceeds the memory available, naming the largest
// use. TrainRun does this itself; a launcher calls it before starting
// processes.
func CheckMemory(res *Resolved, workers []WorkerSet, extra ...MemoryUse) error {
	e, envBytes, err := envFootprint(res.Header.Envs, res.Header.Env)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	obs, act := e.ObservationSpace(), e.ActionSpace()
	e.Close()
	return checkMemory(append(EstimateMemory(res.Header, res.Config, obs, act, envBytes, workers), extra...))
}

// CheckEnvsMemory refuses, with ErrMemory, n envs of id (key names the
// setting, e.g. "--num-envs 1000000000") when they would not fit the
// memory available: each the heap one env of id takes to make plus its
// observation and action, as EstimateMemory counts num_envs.
func CheckEnvsMemory(mk env.Maker, id string, n int, key string) error {
	e, envBytes, err := envFootprint(mk, id)
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
func envFootprint(mk env.Maker, id string) (env.Env, float64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// Agents with different action spaces are measured too (the widest
	// action counts); whether one policy may act for them all is the
	// executor's to refuse.
	e, err := mk.Make(id, env.WithAgentActionSpaces())
	if err != nil {
		return nil, 0, err
	}
	runtime.ReadMemStats(&after)
	return e, max(1024, float64(after.TotalAlloc-before.TotalAlloc)), nil
}

// yamlFields yields the yaml key and value of each field of the struct x
// holds (through pointers and interfaces; nothing for a nil one or a
// non-struct), and of the structs it inlines (yaml ",inline", as the
// off-policy configs' common settings): the one walk the key lookups and
// checks over configs share.
func yamlFields(x any) iter.Seq2[string, reflect.Value] {
	return func(yield func(string, reflect.Value) bool) {
		v := reflect.ValueOf(x)
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			key, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if opts == "inline" {
				for k, f := range yamlFields(v.Field(i).Interface()) {
					if !yield(k, f) {
						return
					}
				}
			} else if !yield(key, v.Field(i)) {
				return
			}
		}
	}
}

// field returns the struct field of cfg tagged yaml:"key", if any.
func field(cfg Config, key string) (reflect.Value, bool) {
	for k, f := range yamlFields(cfg) {
		if k == key {
			return f, true
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
