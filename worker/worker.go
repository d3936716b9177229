package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/transport"
	"herd/weights"
)

// Valuer reads state values off policy outputs without drawing random
// numbers (as run/hts needs too). The env worker uses it for the
// truncation bootstrap and the segment's last values; a sampler that does
// not implement it follows the on-policy convention that V(s) ends every
// row of outputs.
type Valuer interface {
	ValuesTo(dst, out []float32, n int)
}

// lastColumn reads V(s) from the last column of each output row.
type lastColumn struct{}

func (lastColumn) ValuesTo(dst, out []float32, n int) {
	w := len(out) / n
	for i := range n {
		dst[i] = out[(i+1)*w-1]
	}
}

// Timeouts bound every wait on a peer; after one runs out the call is
// retried, until the role's context ends. Zero fields take the defaults.
type Timeouts struct {
	// Infer bounds one inference round trip (default 1 s). A request sent
	// to a policy worker that dies with it is never answered: this bound is
	// the env worker's stall before it asks again (and the queue group
	// routes the retry to a live member), so it stays well under the 2 s
	// stall the dist executor promises (docs/BENCHMARKS.md "Faults").
	Infer time.Duration
	// Push bounds one sample push, back-pressure included (default 30 s).
	Push time.Duration
	// Weights bounds an inline env worker's wait, before a segment, for
	// the first version made after its last push was taken (default
	// 10 s); when it runs out the worker acts on the newest version it
	// holds and counts a stale start (Progress.FetchFailed).
	Weights time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Infer <= 0 {
		t.Infer = time.Second
	}
	if t.Push <= 0 {
		t.Push = 30 * time.Second
	}
	if t.Weights <= 0 {
		t.Weights = 10 * time.Second
	}
	return t
}

// EnvConfig configures one env worker.
type EnvConfig struct {
	// Slot numbers the env worker (0, 1, …); its randomness derives from
	// (Seed, "env-worker", Slot) and its envs' seeds from (Seed,
	// "dist/env", Slot·len(Envs)+j).
	Slot int
	Seed uint64
	// Envs are the worker's envs (made with env.WithEpisodeStatistics to
	// report episodes). The worker resets them; the caller closes them.
	Envs []env.Env
	// Vector, for RunEnvVector in place of Envs, is the worker's envs as
	// one vector (one policy's rows of a multi-agent vector).
	Vector env.Vector
	// Steps is T, the steps per segment.
	Steps int
	// Gamma discounts the truncation bootstrap.
	Gamma float32
	// Segments is how many segments to push (0: until ctx ends).
	Segments int
	// Peers is the number of env workers that feed this worker's learner,
	// this one included (0 counts as 1): the versions the learners reach
	// from its last segment and those peers' without another of its own.
	// An inline worker never waits for a version more than Peers after
	// its last segment's (see pushSegments).
	Peers    int
	Timeouts Timeouts
	// Resume is where this start of the worker continues (see Resume).
	Resume transport.Progress
	// OnPushed, when set, is called after each acknowledged push with the
	// worker's progress; the caller stores it for the next incarnation
	// (transport.Membership.Save).
	OnPushed func(transport.Progress)
	// Groups is G, runtime.env_groups (0 or 1: one group): the envs split
	// into G equal blocks, and while one block steps, the inference
	// requests of the others are in flight (double buffering). For a fixed
	// weights version the results are those of G = 1 (see startGroups).
	Groups int
	// Timing, when set, receives the worker's time by phase.
	Timing *StepTiming
	// Metrics, when set, counts the worker's steps, episodes, pushes,
	// retries and call latencies for Prometheus.
	Metrics *EnvMetrics
}

// Resume is where a start of an env worker continues from, as
// transport.Membership.Resume hands it out: its samples carry the ids (slot,
// Incarnation, Seq+1, Seq+2, …), so a learner takes none of them for a
// repeat of an earlier start's and a retried push is learned once; its
// schedules (DQN's ε) continue from Steps; and a restarted worker
// (Incarnation > 1) draws its actions and env seeds from streams of its
// own instead of replaying the first start's.

// streams returns the names of an incarnation's random streams: the first
// start keeps the names a worker without incarnations uses.
func streams(inc uint64) (actions, envs string) {
	if inc <= 1 {
		return "env-worker", "dist/env"
	}
	s := "/" + strconv.FormatUint(inc, 10)
	return "env-worker" + s, "dist/env" + s
}

// RunEnv runs an env worker: it steps its envs with actions sampled from
// the policy workers' outputs and pushes one segment per Steps steps. It
// returns nil after cfg.Segments segments, or ctx's error.
func RunEnv(ctx context.Context, cfg EnvConfig, pieces *algo.Pieces, inf transport.InferenceStream, samples transport.SampleStream) error {
	if inf == nil {
		return fmt.Errorf("worker: env worker %d needs an inference stream", cfg.Slot)
	}
	return runEnv(ctx, cfg, pieces, inf, nil, samples)
}

// RunEnvInline runs an on-policy env worker under inline inference
// (runtime.inference: inline): instead of asking policy workers, it acts
// with a policy copy of its own (as the off-policy env workers do). It
// waits for the learner's first weights; before each later segment it
// waits for the version the learner makes from its last one (at most
// Timeouts.Weights; over a stream without a queue that bounds the lag,
// see pushSegments), takes the newest version the parameter service holds and
// acts on it for the whole segment, so every step of a segment records that version
// (Segment.Versions) and the learner's lag counts stay exact. The
// actions are drawn from the stream RunEnv draws from ((Seed,
// "env-worker", Slot)): with the weights of a fixed version, the segments
// are bit for bit RunEnv's (TestInlineMatchesPolicyWorker). Env groups
// are refused: with no request in flight there is nothing to overlap.
func RunEnvInline(ctx context.Context, cfg EnvConfig, pieces *algo.Pieces, params transport.ParamService, samples transport.SampleStream) error {
	if params == nil || pieces == nil || pieces.NewPolicy == nil {
		return fmt.Errorf("worker: inline env worker %d needs a parameter service and a policy", cfg.Slot)
	}
	if cfg.Groups > 1 {
		return fmt.Errorf("worker: env worker %d: %w: runtime.env_groups %d overlaps inference requests, and inline inference makes none", cfg.Slot, ErrGroups, cfg.Groups)
	}
	return runEnv(ctx, cfg, pieces, nil, params, samples)
}

// nextWait says which version an inline env worker waits for before its
// next segment — the one the learner makes from the segment just pushed —
// and for how long. The learner announces its version before it takes a
// segment and the next one after learning it, and the push returns once
// it took ours; before and taken are the newest versions known just before
// the push and just after it. If nothing was announced meanwhile, the
// learner took our segment at taken and makes taken + 1 from it: wait for
// that, up to the weights timeout. If something was, taken may already be
// our segment's version (the learner learned it before we looked), and
// taken + 1 then needs another worker's segment, which a paused peer never
// sends; or the learner is still learning ours after others'. So wait for
// taken + 1 only about as long as a version usually takes (4 × the last
// wait that succeeded, at least minWait), then go on with what is held,
// not counted as a stale start. The target is also capped at Peers
// versions after the segment's own.
func nextWait(before, taken, segVersion uint64, peers int, timeout, lastWait time.Duration) (uint64, time.Duration, bool) {
	target := min(taken+1, segVersion+uint64(max(peers, 1)))
	if taken > before && target > taken {
		return target, min(timeout, max(4*lastWait, minWait)), false
	}
	return target, timeout, true
}

// minWait is nextWait's shortest wait when the version to wait for is in
// doubt.
const minWait = 50 * time.Millisecond

// runEnv is RunEnv with the policy workers' inference stream inf, or
// RunEnvInline with an inline copy kept from params.
func runEnv(ctx context.Context, cfg EnvConfig, pieces *algo.Pieces, inf transport.InferenceStream, params transport.ParamService, samples transport.SampleStream) error {
	m := len(cfg.Envs)
	if m == 0 || cfg.Steps < 1 || pieces == nil || pieces.NewSampler == nil {
		return fmt.Errorf("worker: env worker %d needs envs (%d), steps ≥ 1 (%d) and a sampler", cfg.Slot, m, cfg.Steps)
	}
	if err := CheckGroups(cfg.Groups, m); err != nil {
		return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
	}
	to := cfg.Timeouts.withDefaults()
	actStream, envStream := streams(cfg.Resume.Incarnation)
	s, err := pieces.NewSampler(m, rng.New(cfg.Seed, actStream, cfg.Slot))
	if err != nil {
		return err
	}
	var cp *inlineCopy
	if params != nil {
		if cp, err = newInlineCopy(ctx, cfg.Slot, pieces, params); err != nil {
			return err
		}
	}
	obsDim := cfg.Envs[0].ObservationSpace().Dim()
	obs := make([]float32, m*obsDim)
	for j, e := range cfg.Envs {
		o, _, err := e.Reset(int64(rng.Derive(cfg.Seed, envStream, cfg.Slot*m+j) >> 1))
		if err != nil {
			return fmt.Errorf("worker: reset env %d: %w", j, err)
		}
		copy(obs[j*obsDim:], o)
	}
	inferT := newCallTimer(ctx, to.Infer)
	defer inferT.stop()
	if cfg.Metrics != nil {
		inferT.retried = cfg.Metrics.inferRetries
	}
	g := max(cfg.Groups, 1)
	k := m / g
	var sd int
	if cp != nil {
		sd = cp.car.sd
	} else if sd, err = stateDim(pieces); err != nil {
		return err
	}
	pol := newStreamPolicy(cfg.Slot, m, k, sd, s, inf, inferT, cp, cfg.Metrics, cfg.Timing)
	var stopGroups func()
	pol.groups, stopGroups = startGroups(ctx, cfg, inf, k)
	defer stopGroups()
	// The vectors are views of the caller's envs, which the caller closes.
	blocks := make([]env.Vector, g)
	for b := range blocks {
		v, err := env.NewSyncVectorOf(cfg.Envs[b*k : (b+1)*k])
		if err != nil {
			return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
		}
		blocks[b] = v
		if cfg.Timing != nil {
			blocks[b] = timedVector{Vector: v, ph: pol.ph, tm: cfg.Timing}
		}
	}
	loop, err := rollout.NewBlockSegments(cfg.Slot, blocks, pol, cfg.Gamma)
	if err != nil {
		return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
	}
	loop.Start(obs)
	return pushSegments(ctx, cfg, loop, m, obsDim, cfg.Envs[0].ActionSpace().Dim(), cp, pol.ph, samples)
}

// pushSegments collects cfg.Segments segments (0: until ctx ends) of m
// envs with loop and pushes them, continuing from cfg.Resume. An inline
// worker (cp set) waits before each segment for the version the learner
// makes from its last one (nextWait), so it has at most one segment the
// learner has not learned, and a segment waits behind at most the other
// workers': policy lag ≤ Peers − 1 while segments take less time to
// gather than the others' to learn. Acting at once instead, on the
// version the learner learns the last segment with, adds a version to
// every segment's lag. Timeouts.Weights ends any wait in vain (a dead
// learner).
func pushSegments(ctx context.Context, cfg EnvConfig, loop *rollout.Segments, m, obsDim, actDim int, cp *inlineCopy, ph *phase, samples transport.SampleStream) error {
	to := cfg.Timeouts.withDefaults()
	pushT := newCallTimer(ctx, to.Push)
	defer pushT.stop()
	met, tm := cfg.Metrics, cfg.Timing
	if met != nil {
		pushT.retried = met.pushRetries
	}
	var buf []byte
	seg := sample.NewSegment(cfg.Steps, m, obsDim, actDim)
	seg.Versions = make([]uint64, cfg.Steps)
	prog := cfg.Resume
	loop.Steps = prog.Steps
	var taken, before uint64
	var lastWait time.Duration
	for n := 0; cfg.Segments == 0 || n < cfg.Segments; n++ {
		if cp != nil {
			if n > 0 {
				target, d, sure := nextWait(before, taken, seg.Version, cfg.Peers, to.Weights, lastWait)
				t0 := time.Now()
				ok, err := cp.await(ctx, target, d)
				if err != nil {
					return err
				}
				if ok {
					lastWait = time.Since(t0)
				} else if sure {
					prog.FetchFailed++
					met.staleStart()
				}
			}
			// One version per segment: the behaviour policy of all its
			// steps, bootstraps and last values.
			if err := cp.refresh(); err != nil {
				return err
			}
		}
		if err := loop.Collect(seg); err != nil {
			return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
		}
		seg.Version = slices.Min(seg.Versions)
		if tm != nil {
			tm.Steps.Add(int64(m * cfg.Steps))
		}
		if met != nil {
			met.steps.Add(float64(m * cfg.Steps))
			met.version.Set(float64(seg.Versions[cfg.Steps-1]))
		}
		var err error
		if buf, err = seg.AppendEncode(buf[:0]); err != nil {
			return err
		}
		// The stream takes ownership of what it is given.
		b := append([]byte(nil), buf...)
		id := transport.SampleID{Slot: cfg.Slot, Incarnation: prog.Incarnation, Seq: prog.Seq + 1}
		if cp != nil {
			before = cp.known()
		}
		if err := push(pushT, samples, id, b, met, len(seg.Episodes)); err != nil {
			return err
		}
		if tm != nil {
			ph.add(&tm.Push)
		}
		if cp != nil {
			taken = cp.known()
		}
		prog.Seq, prog.Steps = id.Seq, loop.Steps
		if cfg.OnPushed != nil {
			cfg.OnPushed(prog)
		}
	}
	return nil
}

// RunPolicy runs a policy worker: it answers batched inference requests
// with the newest weights the parameter service knows, until ctx ends. A
// recurrent policy's requests carry each env's state and the replies the
// next (carrier), so the worker keeps none.
func RunPolicy(ctx context.Context, pieces *algo.Pieces, inf transport.InferenceStream, params transport.ParamService) error {
	return RunPolicyWith(ctx, PolicyConfig{}, pieces, inf, params)
}

// PolicyConfig configures a policy worker.
type PolicyConfig struct {
	// Metrics, when set, counts batches, their sizes and forward times,
	// and the weights version, for Prometheus.
	Metrics *PolicyMetrics
	// Timing, when set, receives the worker's batch counts, sizes and
	// latencies (profiling).
	Timing *PolicyTiming
}

// RunPolicyWith is RunPolicy with a configuration.
func RunPolicyWith(ctx context.Context, cfg PolicyConfig, pieces *algo.Pieces, inf transport.InferenceStream, params transport.ParamService) error {
	met, tm := cfg.Metrics, cfg.Timing
	p, err := pieces.NewPolicy()
	if err != nil {
		return err
	}
	car := newCarrier(p)
	var obs, out []float32
	var arrived []time.Time
	err = inf.Serve(ctx, func(_ context.Context, batch []*transport.InferRequest) error {
		if tm != nil {
			t0 := time.Now()
			defer func() {
				now, rows := time.Now(), 0
				arrived = arrived[:0]
				for _, r := range batch {
					rows += r.Rows
					arrived = append(arrived, r.Arrived)
				}
				tm.record(rows, arrived, now, now.Sub(t0))
			}()
		}
		if v := params.Latest(); v != nil && v.N != p.Version() {
			if err := p.SetWeights(v); err != nil {
				return fmt.Errorf("worker: policy weights %d: %w", v.N, err)
			}
		}
		obs = obs[:0]
		rows := 0
		for _, r := range batch {
			obs = append(obs, r.Obs...)
			rows += r.Rows
		}
		var t0 time.Time
		if met != nil {
			t0 = time.Now()
		}
		out = car.forward(out, obs, rows)
		off := 0
		for _, r := range batch {
			off += copy(r.Out, out[off:])
			r.WeightsVersion = p.Version()
		}
		if met != nil {
			met.forward.Observe(since(t0))
			met.batches.Inc()
			met.requests.Add(float64(len(batch)))
			met.rows.Add(float64(rows))
			met.batchRows.Observe(float64(rows))
			met.batchReqs.Observe(float64(len(batch)))
			met.version.Set(float64(p.Version()))
		}
		return nil
	})
	return err
}

// LearnerConfig configures the learner.
type LearnerConfig struct {
	// Iterations is how many segments to learn from (0: until ctx ends).
	Iterations int
	// OnIteration, when set, is called after each iteration with the
	// segment learned from and the learner's scalars.
	OnIteration func(iter int, seg *sample.Segment, stats []algo.Stat)
	// OnDrop, when set, is told of every pulled sample that does not
	// decode as a segment; such samples are dropped either way.
	OnDrop func(err error)
	// MaxLag, when > 0, is runtime.max_policy_lag: a segment any of whose
	// steps acted on weights more than MaxLag versions older than the
	// learner's is dropped (and counted) instead of learned from.
	MaxLag uint64
	// Stall, when > 0, is the progress watchdog: no sample for this long
	// ends the learner with an error that says so and, when Alive is set,
	// which workers are alive.
	Stall time.Duration
	Alive func(ctx context.Context) string
	// Counters, when set, is kept up to date (on the learner's goroutine,
	// so OnIteration may read it); on learner 0 of a group, the sum over
	// all learners, as of the current update.
	Counters *Counters
	// Group, when set, makes the learner one of several data-parallel
	// learners; only learner 0 publishes (params may be nil on the others)
	// and calls OnIteration, with a segment that holds every learner's
	// episodes (T × all learners' envs).
	Group *LearnerGroup
	// Start, when set, is called with the learner once it is built and
	// before it publishes: a learner that resumes a run restores its state
	// there and returns the iterations already done (0 for a fresh run),
	// which count toward Iterations.
	Start func(l algo.SegmentLearner) (done int, err error)
	// MinVersion is the least number the learner's first published
	// version may have (transport.HeldBound after a restart: the readers
	// hold the earlier learner's versions); the learner numbers its
	// versions from there on.
	MinVersion uint64
}

// Counters are a learner's tallies of the samples it pulled. Lags are in
// weights versions: the learner's version when it learns a step minus the
// version that acted at that step.
type Counters struct {
	// Learned counts the samples learned from, Dropped those dropped for a
	// lag beyond MaxLag, DecodeErrors those that did not decode (or did
	// not fit the replay).
	Learned, Dropped, DecodeErrors uint64
	// LagSum and LagSteps give the mean lag of the steps learned from;
	// LagMax is the largest.
	LagSum   float64
	LagSteps uint64
	LagMax   uint64
	// PeerDuplicates and PeerStreamErrors are, on learner 0 of several
	// (LearnerGroup), the other learners' sample streams' repeated pushes
	// and undecodable messages (its own stream's are in its Stats).
	PeerDuplicates, PeerStreamErrors uint64
	// ParamChecks counts, on learner 0 of several, the rounds in which the
	// learners compared their parameters' hashes and found them equal.
	ParamChecks uint64
}

// LagMean is the mean lag of the steps learned from (0 before any).
func (c *Counters) LagMean() float64 {
	if c.LagSteps == 0 {
		return 0
	}
	return c.LagSum / float64(c.LagSteps)
}

// addLag counts n steps that acted on version v, learned at version cur.
func (c *Counters) addLag(cur, v uint64, n int) {
	lag := uint64(0)
	if cur > v {
		lag = cur - v
	}
	c.LagSum += float64(lag) * float64(n)
	c.LagSteps += uint64(n)
	c.LagMax = max(c.LagMax, lag)
}

// segmentLag returns the lag of seg's oldest step at version cur.
func segmentLag(cur uint64, seg *sample.Segment) uint64 {
	if cur > seg.Version {
		return cur - seg.Version
	}
	return 0
}

// pull takes the next sample, ending with the watchdog's error when none
// comes for cfg.Stall.
func pull(ctx context.Context, samples transport.SampleStream, stall time.Duration, alive func(context.Context) string) ([]byte, error) {
	if stall <= 0 {
		return samples.Pull(ctx)
	}
	pctx, cancel := context.WithTimeout(ctx, stall)
	b, err := samples.Pull(pctx)
	cancel()
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		msg := fmt.Sprintf("worker: the learner got no sample for %v", stall)
		if alive != nil {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			msg += "; " + alive(actx)
			cancel()
		}
		return nil, errors.New(msg)
	}
	return b, err
}

// RunLearner runs the learner: it publishes the initial weights (version
// 0), then for each segment pulled learns and publishes the next version.
// It returns the learner (to save or evaluate its model) and nil after
// cfg.Iterations, or ctx's error. A sample that does not decode is
// dropped and reported to cfg.OnDrop, one that is too old (cfg.MaxLag)
// dropped; both are counted and neither stops the learner.
func RunLearner(ctx context.Context, cfg LearnerConfig, pieces *algo.Pieces, samples transport.SampleStream, params transport.ParamService) (algo.SegmentLearner, error) {
	if pieces == nil || pieces.NewSegmentLearner == nil {
		return nil, fmt.Errorf("worker: the learner needs an on-policy algorithm (SegmentLearner)")
	}
	l, err := pieces.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	if c, ok := l.(interface{ Close() error }); ok {
		defer c.Close() // stops helper goroutines; the learner stays usable
	}
	cnt := cfg.Counters
	if cnt == nil {
		cnt = &Counters{}
	}
	own, g, lead := cnt, cfg.Group, true
	if g != nil {
		dp, ok := l.(algo.DataParallel)
		if !ok {
			return l, errNotDataParallel
		}
		if err := dp.SetReducer(NewReducer(g)); err != nil {
			return l, err
		}
		own, lead = &Counters{}, g.Slot == 0
	}
	start := 0
	if cfg.Start != nil {
		if start, err = cfg.Start(l); err != nil {
			return l, err
		}
	}
	weightsOf := versionsFrom(l.Weights, cfg.MinVersion)
	v := weightsOf()
	if lead {
		if err := params.Publish(ctx, v); err != nil {
			return l, err
		}
	}
	cur := v.N
	learned := time.Now() // the last segment learned (the watchdog of drops)
	for it := start; cfg.Iterations == 0 || it < cfg.Iterations; {
		b, err := pull(ctx, samples, cfg.Stall, cfg.Alive)
		if err != nil {
			return l, err
		}
		seg, err := sample.DecodeSegment(b)
		if err != nil {
			own.DecodeErrors++
			if cfg.OnDrop != nil {
				cfg.OnDrop(err)
			}
			continue
		}
		if cfg.MaxLag > 0 && segmentLag(cur, seg) > cfg.MaxLag {
			own.Dropped++
			// Samples that keep coming, all too old, are no progress
			// either: the acting weights are stuck (the learner publishes
			// only after it learns, so this does not mend itself).
			if cfg.Stall > 0 && time.Since(learned) > cfg.Stall {
				return l, fmt.Errorf("worker: the learner dropped every sample for %v as older than max_policy_lag %d versions (last lag %d): the policy workers' weights are not moving",
					cfg.Stall, cfg.MaxLag, segmentLag(cur, seg))
			}
			continue
		}
		learned = time.Now()
		if len(seg.Versions) == seg.T {
			for _, sv := range seg.Versions {
				own.addLag(cur, sv, seg.N)
			}
		} else {
			own.addLag(cur, seg.Version, seg.T*seg.N)
		}
		own.Learned++
		report := seg
		if g != nil {
			ss := samples.Stats()
			infos, err := exchangeRound(ctx, g.Collective, roundInfo{T: seg.T, N: seg.N, Episodes: seg.Episodes, Counters: *own,
				Duplicates: ss.Duplicates, StreamErrors: ss.Malformed + ss.WrongProtocol, Params: paramsHash(it, l.Weights)})
			if err == nil {
				err = checkParams(infos)
			}
			if err != nil {
				return l, fmt.Errorf("worker: learner %d: %w", g.Slot, err)
			}
			if lead {
				report = mergeRound(infos, cnt)
			}
		}
		stats, err := l.Learn(ctx, seg)
		if err != nil {
			if g != nil {
				return l, fmt.Errorf("worker: learner %d: %w", g.Slot, err)
			}
			return l, err
		}
		cur++
		if lead {
			v := weightsOf()
			if err := params.Publish(ctx, v); err != nil {
				return l, err
			}
			cur = v.N
			if cfg.OnIteration != nil {
				cfg.OnIteration(it, report, stats)
			}
		}
		it++
	}
	return l, nil
}

// versionsFrom returns current with its versions numbered from min on:
// a learner's versions are its update count, raised when the readers
// hold higher numbers (an earlier learner of the run).
func versionsFrom(current func() *weights.Version, min uint64) func() *weights.Version {
	var base uint64
	if n := current().N; min > n {
		base = min - n
	}
	return func() *weights.Version {
		v := current()
		if base > 0 {
			w := *v
			w.N += base
			return &w
		}
		return v
	}
}
