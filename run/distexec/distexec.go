package distexec

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"herd/algo"
	"herd/dist"
	"herd/dist/worker"
	"herd/env"
	"herd/nn"
	"herd/run/hts"
	"herd/sample"
)

// ErrConfig marks a run config this executor cannot run.
var ErrConfig = algo.ErrConfig

// Options are the executor's settings (the runtime: section).
type Options struct {
	// EnvWorkers is E (default 1); PolicyWorkers is P (default 1).
	EnvWorkers, PolicyWorkers int
	// Transport is "inproc" (default) or "nats".
	Transport string
	// NATSURL is an external server's URL; empty starts an embedded one.
	NATSURL string
}

// OptionsOf reads the executor's options from a run header.
func OptionsOf(h algo.Header) Options {
	rc := h.Runtime
	return Options{EnvWorkers: rc.EnvWorkers, PolicyWorkers: rc.PolicyWorkers, Transport: rc.Transport, NATSURL: rc.NATSURL}
}

// Train runs spec's pieces as a distributed topology for rt.Header.Steps
// env steps and returns the learner's model.
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	shape, ok := cfg.(hts.Shape)
	if !ok || spec.Pieces == nil {
		return nil, fmt.Errorf("%w: algorithm %s has no on-policy pieces (the dist executor runs PPO and A2C)", ErrConfig, spec.Name)
	}
	numEnvs, T, gamma := shape.RolloutShape()
	if opt.EnvWorkers == 0 {
		opt.EnvWorkers = 1
	}
	if opt.PolicyWorkers == 0 {
		opt.PolicyWorkers = 1
	}
	if opt.EnvWorkers < 1 || opt.PolicyWorkers < 1 || numEnvs < 1 || T < 1 {
		return nil, fmt.Errorf("%w: env_workers %d and policy_workers %d must be ≥ 1", ErrConfig, opt.EnvWorkers, opt.PolicyWorkers)
	}
	iters := int(h.Steps / int64(numEnvs*T))
	if iters < 1 {
		return nil, fmt.Errorf("%w: steps %d is less than one segment (%d envs × %d steps)", ErrConfig, h.Steps, numEnvs, T)
	}

	envs := make([][]env.Env, opt.EnvWorkers)
	defer func() {
		for _, es := range envs {
			for _, e := range es {
				e.Close()
			}
		}
	}()
	for k := range envs {
		for range numEnvs {
			e, err := env.Make(h.Env, env.WithEpisodeStatistics())
			if err != nil {
				return nil, err
			}
			envs[k] = append(envs[k], e)
		}
	}
	pieces, err := spec.Pieces(h, cfg, algo.SpacesOf(envs[0][0]))
	if err != nil {
		return nil, err
	}
	if pieces.NewSegmentLearner == nil {
		return nil, fmt.Errorf("%w: algorithm %s is not on-policy", ErrConfig, spec.Name)
	}
	p0, err := pieces.NewPolicy()
	if err != nil {
		return nil, err
	}
	like, err := paramsOf(pieces)
	if err != nil {
		return nil, err
	}
	obsDim := envs[0][0].ObservationSpace().Dim()
	sopt := dist.Options{ObsDim: obsDim, OutDim: p0.OutDim(), Like: like, MaxBatchRows: max(4096, numEnvs)}

	newTransport, closeAll, err := transport(opt)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	const run = "herd"
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	open := func() (dist.InferenceStream, dist.SampleStream, dist.ParamService, error) {
		tr, err := newTransport()
		if err != nil {
			return nil, nil, nil, err
		}
		inf, err := tr.Inference(ctx, run, sopt)
		if err != nil {
			return nil, nil, nil, err
		}
		closers = append(closers, inf.Close)
		s, err := tr.Samples(ctx, run, sopt)
		if err != nil {
			return nil, nil, nil, err
		}
		closers = append(closers, s.Close)
		p, err := tr.Params(ctx, run, sopt)
		if err != nil {
			return nil, nil, nil, err
		}
		closers = append(closers, p.Close)
		return inf, s, p, nil
	}

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var werr error
	fail := func(err error) {
		if err != nil && wctx.Err() == nil {
			mu.Lock()
			werr = errors.Join(werr, err)
			mu.Unlock()
			stop()
		}
	}
	defer func() { stop(); wg.Wait() }()
	for range opt.PolicyWorkers {
		inf, _, p, err := open()
		if err != nil {
			return nil, err
		}
		wg.Go(func() { fail(worker.RunPolicy(wctx, pieces, inf, p)) })
	}
	for k := range opt.EnvWorkers {
		inf, s, _, err := open()
		if err != nil {
			return nil, err
		}
		cfg := worker.EnvConfig{Slot: k, Seed: h.Seed, Envs: envs[k], Steps: T, Gamma: gamma}
		wg.Go(func() { fail(worker.RunEnv(wctx, cfg, pieces, inf, s)) })
	}
	_, s, p, err := open()
	if err != nil {
		return nil, err
	}
	var step int64
	l, err := worker.RunLearner(wctx, worker.LearnerConfig{Iterations: iters,
		OnIteration: func(_ int, seg *sample.Segment, stats []algo.Stat) {
			for _, e := range seg.Episodes {
				rt.Log.Episode(step+int64((e.At+1)*seg.N), e.Return, e.Length)
			}
			step += int64(seg.T * seg.N)
			for _, st := range stats {
				rt.Log.Scalar(st.Name, st.Value)
			}
			rt.Log.Step(step)
		}}, pieces, s, p)
	stop()
	wg.Wait()
	var model algo.Model
	if m, ok := l.(interface{ Model() algo.Model }); ok {
		model = m.Model()
	}
	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		return model, werr
	}
	if err != nil {
		return model, err
	}
	if model == nil {
		return nil, fmt.Errorf("%w: %s's learner cannot hand out its model", ErrConfig, spec.Name)
	}
	return model, nil
}

// paramsOf returns the parameter list of the run's model (for decoding
// weights off the wire): the initial version's tensors.
func paramsOf(pieces *algo.Pieces) ([]*nn.Param, error) {
	l, err := pieces.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	v := l.Weights()
	ps := make([]*nn.Param, v.Len())
	for i := range ps {
		ps[i] = v.Param(i)
	}
	return ps, nil
}

// transport returns a maker of transports, one per role: the shared
// in-process world, or a new NATS connection each (to an embedded server
// started here unless opt.NATSURL names one).
func transport(opt Options) (func() (dist.Transport, error), func(), error) {
	switch opt.Transport {
	case "", "inproc":
		ip := dist.NewInproc()
		return func() (dist.Transport, error) { return ip, nil }, func() {}, nil
	case "nats":
	default:
		return nil, nil, fmt.Errorf("%w: runtime.transport %q is not inproc or nats", ErrConfig, opt.Transport)
	}
	url := opt.NATSURL
	var srv *dist.Server
	if url == "" {
		s, err := dist.StartServer(dist.ServerOptions{})
		if err != nil {
			return nil, nil, err
		}
		srv, url = s, s.URL()
	}
	var conns []*nats.Conn
	closeAll := func() {
		for _, nc := range conns {
			nc.Close()
		}
		if srv != nil {
			srv.Shutdown()
		}
	}
	return func() (dist.Transport, error) {
		nc, err := nats.Connect(url, nats.Name("herd"), nats.MaxReconnects(-1))
		if err != nil {
			return nil, fmt.Errorf("distexec: connect to the NATS server: %w", err) // the URL may hold credentials
		}
		conns = append(conns, nc)
		return dist.NewNATS(nc)
	}, closeAll, nil
}
