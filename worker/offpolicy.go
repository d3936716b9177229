package worker

import (
	"context"
	"fmt"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/transport"
)

// The off-policy topology (Ape-X, Horgan et al. 2018): env workers act
// with inline policy copies refreshed from the parameter service — no
// policy workers, no inference stream — assemble n-step transitions,
// optionally compute their initial priorities with that copy, and push
// them in chunks on the sample stream; one learner owns the (prioritized)
// replay, inserts what it pulls and runs TransitionLearner.Learn on the
// global env-step counter, publishing weights to the parameter service.
//
// Inline copies rather than the policy workers' inference stream: an
// off-policy actor's forward pass is a small MLP on a few observations,
// cheaper than an inference round trip, and Ape-X's actors compute
// priorities with their own copy anyway. The cost is staleness: a copy is
// at most RefreshEvery env steps (plus the parameter service's delay)
// behind the learner, which off-policy learning tolerates.

// OffEnvConfig configures one off-policy env worker.
type OffEnvConfig struct {
	// Slot numbers the env worker; its randomness derives from (Seed,
	// "env-worker", Slot) and its envs' reset seed from (Seed, "dist/env",
	// Slot).
	Slot int
	Seed uint64
	// Envs are the worker's envs (with episode statistics); the worker
	// resets them, the caller closes them.
	Envs env.Vector
	// Chunk is the number of vector steps per pushed sample (Ape-X's
	// local buffer; its priorities are computed together).
	Chunk int
	// RefreshEvery is the number of this worker's env steps between
	// looks at the parameter service (≥ 1).
	RefreshEvery int
	// StepScale turns this worker's env steps into the global step its
	// sampler's schedule (DQN's ε) reads: the number of env workers, as
	// they step at about the same rate.
	StepScale int64
	// Actors is the number of env workers (N of Ape-X's per-actor ε_i,
	// algo.ActorExplorer); 0: the sampler is not told.
	Actors int
	// Chunks is how many samples to push (0: until ctx ends).
	Chunks   int
	Timeouts Timeouts
	// Resume and OnPushed work as EnvConfig's; Resume.Steps counts this
	// worker's env steps, which its sampler's schedule continues from.
	Resume   transport.Progress
	OnPushed func(transport.Progress)
	// Metrics, when set, counts steps, episodes, pushes and their latency
	// and retries, and the weights version of the inline copy.
	Metrics *EnvMetrics
}

// RunOffEnv runs an off-policy env worker: it waits for the learner's
// first weights, then steps its envs with its own policy copy and pushes
// the transitions of every Chunk vector steps (with initial priorities
// when pieces has a Prioritizer). It returns nil after cfg.Chunks
// samples, or ctx's error.
func RunOffEnv(ctx context.Context, cfg OffEnvConfig, pieces *algo.Pieces, params transport.ParamService, samples transport.SampleStream) error {
	if cfg.Envs == nil || cfg.Chunk < 1 || cfg.RefreshEvery < 1 || cfg.StepScale < 1 || pieces == nil ||
		pieces.NewPolicy == nil || pieces.NewSampler == nil || pieces.NewAssembler == nil {
		return fmt.Errorf("worker: off-policy env worker %d needs envs, chunk ≥ 1 (%d), refresh_every ≥ 1 (%d), step scale ≥ 1 (%d) and off-policy pieces",
			cfg.Slot, cfg.Chunk, cfg.RefreshEvery, cfg.StepScale)
	}
	to := cfg.Timeouts.withDefaults()
	pushT := newCallTimer(ctx, to.Push)
	defer pushT.stop()
	met := cfg.Metrics
	if met != nil {
		pushT.retried = met.pushRetries
	}
	n := cfg.Envs.NumEnvs()
	actStream, envStream := streams(cfg.Resume.Incarnation)
	s, err := pieces.NewSampler(n, rng.New(cfg.Seed, actStream, cfg.Slot))
	if err != nil {
		return err
	}
	if ae, ok := s.(algo.ActorExplorer); ok && cfg.Actors > 0 {
		ae.SetActor(cfg.Slot, cfg.Actors)
	}
	asm, err := pieces.NewAssembler(n)
	if err != nil {
		return err
	}
	var prio algo.Prioritizer
	if pieces.NewPrioritizer != nil {
		if prio, err = pieces.NewPrioritizer(); err != nil {
			return err
		}
	}
	pol, err := newInlineCopy(ctx, cfg.Slot, pieces, params)
	if err != nil {
		return err
	}
	loop, err := rollout.NewTransitions(cfg.Envs, rollout.NewInline(pol.pol, s), asm)
	if err != nil {
		return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
	}
	if err := loop.Reset(int64(rng.Derive(cfg.Seed, envStream, cfg.Slot) >> 1)); err != nil {
		return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
	}
	prog := cfg.Resume
	var (
		tr    sample.Transitions
		buf   []byte
		local = prog.Steps
		since int
	)
	for k := 0; cfg.Chunks == 0 || k < cfg.Chunks; k++ {
		rollout.ClearTransitions(&tr)
		tr.Worker, tr.Version = cfg.Slot, pol.version()
		for range cfg.Chunk {
			if since >= cfg.RefreshEvery {
				since = 0
				if err := pol.refresh(); err != nil {
					return err
				}
			}
			// The loop appends: the chunk's transitions accumulate in tr.
			if err := loop.Step(local*cfg.StepScale, &tr); err != nil {
				return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
			}
			local += int64(n)
			since += n
			if met != nil {
				met.steps.Add(float64(n))
				met.version.Set(float64(pol.version()))
			}
		}
		if prio != nil {
			// One batched pass over the chunk with the current copy, as
			// Ape-X's actors do for their local buffer.
			if err := prio.Prioritize(&tr, pol.pol); err != nil {
				return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
			}
		}
		if buf, err = tr.AppendEncode(buf[:0]); err != nil {
			return err
		}
		msg := append([]byte(nil), buf...) // the stream takes ownership
		id := transport.SampleID{Slot: cfg.Slot, Incarnation: prog.Incarnation, Seq: prog.Seq + 1}
		if err := push(pushT, samples, id, msg, met, len(tr.Episodes)); err != nil {
			return err
		}
		prog.Seq, prog.Steps = id.Seq, local
		if cfg.OnPushed != nil {
			cfg.OnPushed(prog)
		}
	}
	return nil
}

// OffLearnerConfig configures the off-policy learner.
type OffLearnerConfig struct {
	// Steps is the number of env steps to learn from; the learner returns
	// once the samples it pulled carry that many.
	Steps int64
	// StepsPerSample is the number of env steps one pushed sample stands
	// for (Chunk × envs per env worker): the learner's global env-step
	// counter advances by it per sample, whatever number of transitions
	// the n-step assembler completed in it.
	StepsPerSample int64
	// PublishEvery is the number of learner updates between published
	// weight versions (≥ 1).
	PublishEvery int
	// OnSample, when set, is called after each sample is stored and
	// learned from, with the global env step, the sample and the scalars.
	OnSample func(step int64, tr *sample.Transitions, stats []algo.Stat)
	// OnDrop, when set, is told of every pulled sample that does not
	// decode as transitions or does not fit the replay; such samples are
	// dropped either way.
	OnDrop func(err error)
	// Stall, Alive and Counters work as LearnerConfig's. Lags are
	// counted, not bounded: Q-learning learns from any behaviour policy's
	// data, and replay holds old data by design.
	Stall    time.Duration
	Alive    func(ctx context.Context) string
	Counters *Counters
	// Group, when set, makes the learner one of several data-parallel
	// learners (see runOffGroup): its replay holds what its own env
	// workers push, only learner 0 publishes (params may be nil on the
	// others) and calls OnSample, with every learner's episodes, and
	// Counters is, on learner 0, the sum over the learners.
	Group *LearnerGroup
	// Start and MinVersion work as LearnerConfig's: Start restores a
	// resumed run's learner and replay before the first publish and
	// returns the global env step already learned.
	Start      func(l algo.TransitionLearner, rb algo.Replay) (step int64, err error)
	MinVersion uint64
}

// RunOffLearner runs the off-policy learner: it publishes the initial
// weights (version 0), then for each sample pulled stores its transitions
// in the replay (at their initial priorities when given), runs the
// updates due for the env steps it brought (the algorithm's replay
// ratio: Learn's schedule is in env steps) and publishes a new version
// every PublishEvery updates. Back-pressure is the sample stream's: the
// learner pulls the next sample only after learning from this one. It
// returns the learner and nil after cfg.Steps env steps, or ctx's error.
// A stop (ctx) lands between two samples: the updates due for the sample
// under way are not interrupted, it is reported to OnSample before the
// version due is published, and no sample is pulled after the stop, so a
// learner that returns ctx's error has learned exactly the samples
// OnSample was told of, and its state can be saved as that of the last
// one's step.
func RunOffLearner(ctx context.Context, cfg OffLearnerConfig, pieces *algo.Pieces, samples transport.SampleStream, params transport.ParamService) (algo.TransitionLearner, error) {
	if pieces == nil || pieces.NewTransitionLearner == nil || pieces.NewReplay == nil {
		return nil, fmt.Errorf("worker: the off-policy learner needs an off-policy algorithm (TransitionLearner)")
	}
	if cfg.Steps < 1 || cfg.StepsPerSample < 1 || cfg.PublishEvery < 1 {
		return nil, fmt.Errorf("worker: off-policy learner: steps %d, steps per sample %d and publish_every %d must be ≥ 1",
			cfg.Steps, cfg.StepsPerSample, cfg.PublishEvery)
	}
	l, err := pieces.NewTransitionLearner()
	if err != nil {
		return nil, err
	}
	defer l.Close() // stops helper goroutines; the learner stays usable
	rb, err := pieces.NewReplay()
	if err != nil {
		return l, err
	}
	cnt := cfg.Counters
	if cnt == nil {
		cnt = &Counters{}
	}
	if cfg.Group != nil {
		return l, runOffGroup(ctx, cfg, cfg.Group, l, rb, samples, params, cnt)
	}
	var step int64
	if cfg.Start != nil {
		if step, err = cfg.Start(l, rb); err != nil {
			return l, err
		}
	}
	weightsOf := versionsFrom(l.Weights, cfg.MinVersion)
	v := weightsOf()
	if err := params.Publish(ctx, v); err != nil {
		return l, stopped(ctx, err)
	}
	published := v.N
	for step < cfg.Steps {
		if err := ctx.Err(); err != nil {
			return l, err // a stream may still hand out a sample it holds
		}
		b, err := pull(ctx, samples, cfg.Stall, cfg.Alive)
		if err != nil {
			return l, stopped(ctx, err)
		}
		tr, err := sample.DecodeTransitions(b)
		if err == nil {
			err = rb.Add(tr)
		}
		if err != nil {
			cnt.DecodeErrors++
			if cfg.OnDrop != nil {
				cfg.OnDrop(err)
			}
			continue
		}
		cnt.Learned++
		cnt.addLag(published, tr.Version, tr.N)
		prev := step
		step = min(step+cfg.StepsPerSample, cfg.Steps)
		// A few milliseconds of updates: a stop waits for them rather than
		// leave the learner between two of them.
		stats, err := l.Learn(context.WithoutCancel(ctx), rb, prev, step)
		if err != nil {
			return l, err
		}
		if cfg.OnSample != nil {
			cfg.OnSample(step, tr, stats)
		}
		if len(stats) > 0 { // updates were made (Weights copies: not per sample)
			if v := weightsOf(); v.N >= published+uint64(cfg.PublishEvery) {
				if err := params.Publish(ctx, v); err != nil {
					return l, stopped(ctx, err)
				}
				published = v.N
			}
		}
	}
	return l, nil
}

// stopped is err, or ctx's error when ctx is done: a pull or a publish
// that a stop cut short reports the stop, whatever the transport made of
// it.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
